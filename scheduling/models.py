"""Scheduling policies (oVirt's cluster policies) and their units, and affinity groups.

A policy is a chain of filters (hard constraints), weights with factors (soft constraints)
and at most one balancer, plus property values. Each cluster uses one policy and may override
its property values. Policy units are the Python classes that do the work: the built-in ones,
and user-written ones registered in settings.
"""

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from project.names import validate_object_name


class OnFailure(models.TextChoices):
    """What a filter that fails (raises, answers in the wrong shape, or runs out of time) does
    to a decision: keep every host (the filter is skipped) or drop every host (no VM is placed
    while it fails). Weights that fail are neutral and balancers move nothing, whatever this
    says."""

    KEEP = "keep", "Keep every host (skip the filter)"
    DROP = "drop", "Drop every host (place nothing)"


class PolicyUnit(models.Model):
    """A scheduling building block: a filter, a weight, a balancer, or several of these.

    ``enabled`` off: policies skip the unit (a disabled balancer moves nothing).
    ``failing_since`` and ``failure`` describe the failure streak the unit is in, if any: the
    alert is raised when a streak begins, not at every decision.
    """

    name = models.CharField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    implementation = models.CharField(
        max_length=255, help_text="Dotted path of the Python class that implements the unit."
    )
    is_filter = models.BooleanField(default=False)
    is_weight = models.BooleanField(default=False)
    is_balance = models.BooleanField(default=False)
    internal = models.BooleanField(default=True, help_text="Built into Corral (not user-written).")
    enabled = models.BooleanField(default=True)
    properties = models.JSONField(
        default=dict, blank=True, help_text="The properties the unit takes, with their rules."
    )
    error = models.TextField(blank=True, help_text="Why the unit cannot be loaded, if it cannot.")
    on_failure = models.CharField(
        max_length=8,
        choices=OnFailure.choices,
        default=OnFailure.KEEP,
        help_text="What a filter that fails does to a decision: keep or drop every host.",
    )
    failing_since = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Since when the unit keeps failing."
    )
    failure = models.TextField(
        blank=True, editable=False, help_text="How the unit failed when its streak began."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.on_failure == OnFailure.DROP and not self.is_filter:
            raise ValidationError(
                {"on_failure": f"{self.name} is not a filter: only a filter drops hosts."}
            )

    @property
    def kinds(self) -> list[str]:
        return [
            kind
            for kind, flag in (
                ("filter", self.is_filter),
                ("weight", self.is_weight),
                ("balance", self.is_balance),
            )
            if flag
        ]


class Policy(models.Model):
    """A cluster scheduling policy. Locked (built-in) policies are read-only: clone them."""

    name = models.CharField(max_length=64, unique=True, validators=[validate_object_name])
    description = models.TextField(blank=True, max_length=2000)
    locked = models.BooleanField(default=False, editable=False)
    is_default = models.BooleanField(
        default=False, help_text="Used by clusters that do not choose a policy."
    )
    properties = models.JSONField(default=dict, blank=True)
    balance = models.ForeignKey(
        PolicyUnit,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="balancing_policies",
        limit_choices_to={"is_balance": True},
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "policies"
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=models.Q(is_default=True),
                name="one_default_policy",
                violation_error_message="Another policy is the default already.",
            )
        ]

    def __str__(self) -> str:
        return self.name


class FilterPosition(models.IntegerChoices):
    FIRST = -1, "first"
    NO_ORDER = 0, "no order"
    LAST = 1, "last"


class PolicyFilter(models.Model):
    """A filter in a policy's chain; ``position`` runs it first, last or anywhere between."""

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="filters")
    unit = models.ForeignKey(
        PolicyUnit, on_delete=models.PROTECT, related_name="+", limit_choices_to={"is_filter": True}
    )
    position = models.IntegerField(choices=FilterPosition.choices, default=FilterPosition.NO_ORDER)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "unit"], name="filter_once_per_policy")
        ]

    def __str__(self) -> str:
        return f"{self.unit} in {self.policy}"

    def clean(self) -> None:
        if self.unit_id and not self.unit.is_filter:
            raise ValidationError({"unit": f"{self.unit} is not a filter."})


class PolicyWeight(models.Model):
    """A weight (cost function) in a policy, multiplied by ``factor``."""

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="weights")
    unit = models.ForeignKey(
        PolicyUnit, on_delete=models.PROTECT, related_name="+", limit_choices_to={"is_weight": True}
    )
    factor = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "unit"], name="weight_once_per_policy")
        ]

    def __str__(self) -> str:
        return f"{self.unit} x{self.factor} in {self.policy}"

    def clean(self) -> None:
        if self.unit_id and not self.unit.is_weight:
            raise ValidationError({"unit": f"{self.unit} is not a weight."})


class AffinityRule(models.TextChoices):
    POSITIVE = "positive", "Positive (together)"
    NEGATIVE = "negative", "Negative (apart)"
    DISABLED = "disabled", "Disabled"


class AffinityGroup(models.Model):
    """VMs (and hosts) that should run together or apart, strictly or as a preference."""

    cluster = models.ForeignKey(
        "hosts.Cluster", on_delete=models.CASCADE, related_name="affinity_groups"
    )
    name = models.CharField(max_length=64, validators=[validate_object_name])
    description = models.TextField(blank=True, max_length=2000)
    vms = models.ManyToManyField("hosts.VirtualMachine", blank=True, related_name="affinity_groups")
    hosts = models.ManyToManyField("hosts.Host", blank=True, related_name="affinity_groups")
    vm_rule = models.CharField(
        max_length=16, choices=AffinityRule.choices, default=AffinityRule.NEGATIVE
    )
    vm_enforcing = models.BooleanField(
        default=True, help_text="Enforcing: a hard rule (filter). Otherwise a preference (weight)."
    )
    host_rule = models.CharField(
        max_length=16, choices=AffinityRule.choices, default=AffinityRule.DISABLED
    )
    host_enforcing = models.BooleanField(default=True)

    grant_scopes = {"cluster": "cluster_id"}

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"],
                name="affinity_group_name_unique_in_cluster",
                violation_error_message="An affinity group with this name exists in the cluster.",
            )
        ]

    def __str__(self) -> str:
        return self.name
