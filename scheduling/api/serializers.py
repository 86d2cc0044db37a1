"""API representations of policy units, policies (with filters, weights, balancer), affinity."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from project.api.serializers import ModelCleanSerializer, NameRelatedField
from scheduling import services
from scheduling.models import (
    AffinityGroup,
    FilterPosition,
    OnFailure,
    Policy,
    PolicyFilter,
    PolicyUnit,
    PolicyWeight,
)


class PolicyUnitSerializer(serializers.ModelSerializer):
    """A policy unit; only ``enabled`` and ``on_failure`` change (``PATCH``)."""

    kinds = serializers.ListField(child=serializers.CharField(), read_only=True)
    enabled = serializers.BooleanField(
        required=False, help_text="Off: every policy skips the unit (a balancer moves nothing)."
    )
    on_failure = serializers.ChoiceField(
        choices=OnFailure.choices,
        required=False,
        help_text="What the unit's filter does to a decision when it fails (raises, answers "
        "wrongly or runs out of time): keep every host, or drop every host. A failing weight "
        "is left out, a failing balancer moves nothing.",
    )

    class Meta:
        model = PolicyUnit
        fields = [
            "id",
            "name",
            "description",
            "kinds",
            "internal",
            "enabled",
            "on_failure",
            "properties",
            "implementation",
            "error",
            "failing_since",
            "failure",
        ]
        read_only_fields = [name for name in fields if name not in ("enabled", "on_failure")]

    def validate_on_failure(self, value):
        unit = self.instance
        if value == OnFailure.DROP and unit is not None and not unit.is_filter:
            raise serializers.ValidationError(
                f"{unit.name} is not a filter: only a filter drops hosts."
            )
        return value


POSITIONS = {
    "first": FilterPosition.FIRST,
    "no_order": FilterPosition.NO_ORDER,
    "last": FilterPosition.LAST,
}


class PolicyFilterSerializer(serializers.ModelSerializer):
    unit = NameRelatedField(slug_field="name", queryset=PolicyUnit.objects.filter(is_filter=True))
    position = serializers.ChoiceField(choices=list(POSITIONS), default="no_order")

    class Meta:
        model = PolicyFilter
        fields = ["id", "unit", "position"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["position"] = {v: k for k, v in POSITIONS.items()}[instance.position]
        return data

    def validate_position(self, value):
        return POSITIONS[value]


class PolicyWeightSerializer(serializers.ModelSerializer):
    unit = NameRelatedField(slug_field="name", queryset=PolicyUnit.objects.filter(is_weight=True))
    factor = serializers.IntegerField(min_value=1, max_value=1000, default=1)

    class Meta:
        model = PolicyWeight
        fields = ["id", "unit", "factor"]


class PolicyBalanceSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    unit = NameRelatedField(slug_field="name", queryset=PolicyUnit.objects.filter(is_balance=True))

    def to_representation(self, policy):
        return {"id": policy.balance_id, "unit": policy.balance.name}


class PolicySerializer(serializers.ModelSerializer):
    filters = PolicyFilterSerializer(many=True, read_only=True)
    weights = PolicyWeightSerializer(many=True, read_only=True)
    balance = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="The balancer unit's name; null: none."
    )
    clusters = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = Policy
        fields = [
            "id",
            "name",
            "description",
            "locked",
            "is_default",
            "properties",
            "filters",
            "weights",
            "balance",
            "clusters",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["locked", "is_default", "created_at", "updated_at"]

    def validate_properties(self, value):
        units = (
            services.policy_units(self.instance)
            if self.instance
            else list(PolicyUnit.objects.all())
        )
        try:
            return services.validate_properties(units, value)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from exc


class ClonePolicySerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    description = serializers.CharField(required=False, allow_blank=True)


class AffinityGroupSerializer(ModelCleanSerializer):
    class Meta:
        model = AffinityGroup
        fields = [
            "id",
            "cluster",
            "name",
            "description",
            "vms",
            "hosts",
            "vm_rule",
            "vm_enforcing",
            "host_rule",
            "host_enforcing",
        ]

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None and not isinstance(self.instance, list):
            # A group lives in one cluster: moving it would strand its VMs and hosts there.
            fields["cluster"].read_only = True
        return fields

    def validate(self, attrs):
        attrs = super().validate(attrs)
        cluster = attrs.get("cluster") or getattr(self.instance, "cluster", None)
        errors = {}
        for field in ("vms", "hosts"):
            outside = [o.name for o in attrs.get(field, []) if o.cluster_id != cluster.pk]
            if outside:
                errors[field] = f"Not in cluster {cluster.name}: {', '.join(outside)}."
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class BalancePreviewSerializer(serializers.Serializer):
    """What the balancer would do: nothing, or migrate a VM from a host to one of candidates."""

    cluster = serializers.CharField()
    policy = serializers.CharField()
    action = serializers.ChoiceField(choices=["none", "migrate"])
    reason = serializers.CharField()
    vm = serializers.IntegerField(required=False)
    vm_name = serializers.CharField(required=False)
    candidates = serializers.ListField(child=serializers.CharField(), required=False)
    loads = serializers.DictField(
        child=serializers.FloatField(), required=False, help_text="CPU load percent per host."
    )

    def get_fields(self):
        fields = super().get_fields()
        # "from" is a Python keyword, so it cannot be declared as a class attribute.
        fields["from"] = serializers.CharField(required=False, help_text="The host to relieve.")
        return fields
