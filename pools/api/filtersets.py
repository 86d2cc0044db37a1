"""Filters for the pools list of the API."""

from pools.models import VmPool
from project.filters import ScopedFilterSet


class VmPoolFilterSet(ScopedFilterSet):
    class Meta:
        model = VmPool
        fields = ["cluster", "template", "type", "stateless"]
