"""Filters for the scheduling lists of the API: policy units, policies, affinity groups."""

from project.filters import ScopedFilterSet
from scheduling.models import AffinityGroup, Policy, PolicyUnit


class PolicyUnitFilterSet(ScopedFilterSet):
    class Meta:
        model = PolicyUnit
        fields = ["internal", "enabled", "is_filter", "is_weight", "is_balance"]


class PolicyFilterSet(ScopedFilterSet):
    """Filters the list of policies (not a policy's filter units)."""

    class Meta:
        model = Policy
        fields = ["locked", "is_default"]


class AffinityGroupFilterSet(ScopedFilterSet):
    class Meta:
        model = AffinityGroup
        fields = ["cluster", "vm_rule", "host_rule"]
