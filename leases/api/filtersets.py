"""Filters for the leases list of the API."""

from leases.models import Lease
from project.filters import ScopedFilterSet


class LeaseFilterSet(ScopedFilterSet):
    class Meta:
        model = Lease
        fields = ["status", "degraded"]
