"""API representation of VM pools, with their counts."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hosts.api.serializers import JobSerializer, VirtualMachineSerializer
from pools.models import VmPool
from project.api.serializers import ModelCleanSerializer


class PoolCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    prestarted = serializers.IntegerField(
        help_text="Unassigned VMs no admin holds that run, are paused, on their way up or "
        "unknown: what the prestart monitor counts against prestarted_vms."
    )
    running_unassigned = serializers.IntegerField(
        help_text="Up, unassigned, not held (busy ones too: see ready)."
    )
    ready = serializers.IntegerField(
        help_text="Handed out running, at once, by taking a VM now (allocatevm): free, Up, and "
        "with no job that changes it (putting SSH keys in the guest does not)."
    )
    takeable = serializers.IntegerField(
        help_text="What taking a VM could hand out now: the ready ones, those being started, "
        "and stopped ones it would start. 0: allocatevm answers 409."
    )
    assigned = serializers.IntegerField()
    starting = serializers.IntegerField(help_text="Unassigned, not held, being started.")
    held = serializers.IntegerField(help_text="Held by an admin: never handed out.")


class VmPoolSerializer(ModelCleanSerializer):
    counts = serializers.SerializerMethodField()

    class Meta:
        model = VmPool
        fields = [
            "id",
            "name",
            "description",
            "cluster",
            "template",
            "type",
            "size",
            "prestarted_vms",
            "max_user_vms",
            "stateless",
            "name_pattern",
            "counts",
            "created_at",
            "updated_at",
        ]

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None and not isinstance(self.instance, list):
            # The pool's VMs were made in this cluster from this template.
            fields["cluster"].read_only = True
            fields["template"].read_only = True
        return fields

    @extend_schema_field(PoolCountsSerializer)
    def get_counts(self, pool) -> dict:
        return {
            "total": getattr(pool, "total_vms", 0),
            "prestarted": getattr(pool, "prestarted_now", 0),
            "running_unassigned": getattr(pool, "running_unassigned", 0),
            "ready": getattr(pool, "ready_vms", 0),
            "takeable": getattr(pool, "takeable_vms", 0),
            "assigned": getattr(pool, "assigned_vms", 0),
            "starting": getattr(pool, "starting_vms", 0),
            "held": getattr(pool, "held_vms", 0),
        }


class PoolUpdateResultSerializer(VmPoolSerializer):
    """A pool after a change, with what the change did not do (e.g. shut prestarted VMs down)."""

    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta(VmPoolSerializer.Meta):
        fields = [*VmPoolSerializer.Meta.fields, "warnings"]


class PoolAllocationSerializer(serializers.Serializer):
    """A VM taken from a pool: the VM, the job starting it (none when it was prestarted)."""

    vm = VirtualMachineSerializer()
    job = JobSerializer(allow_null=True)
    instant = serializers.BooleanField(
        help_text="True when a prestarted VM was handed out (no start needed)."
    )
