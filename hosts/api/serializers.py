"""API representations of clusters, hosts, templates and VMs (field names as Blazar and oVirt)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from hosts.models import (
    Cluster,
    ExternalDomain,
    Host,
    Job,
    Template,
    VirtualMachine,
    VmStatus,
)
from hosts.validators import without_password
from project.api.serializers import ModelCleanSerializer, ScopedRelatedField
from project.models import Event
from scheduling.models import Policy
from scheduling.services import policy_units, validate_properties


class ClusterSerializer(ModelCleanSerializer):
    host_count = serializers.IntegerField(read_only=True)
    vm_count = serializers.IntegerField(read_only=True)
    policy = serializers.PrimaryKeyRelatedField(
        queryset=Policy.objects.all(),
        required=False,
        allow_null=True,
        help_text="Scheduling policy id; null uses the default policy.",
    )

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "description",
            "policy",
            "policy_properties",
            "memory_overcommit_percent",
            "cpu_overcommit_ratio",
            "host_count",
            "vm_count",
            "created_at",
            "updated_at",
        ]

    def prepare(self, attrs):
        if "policy" not in attrs and "policy_properties" not in attrs:
            return
        policy = attrs.get("policy", getattr(self.instance, "policy", None))
        policy = policy or Policy.objects.filter(is_default=True).first()
        values = attrs.get("policy_properties", getattr(self.instance, "policy_properties", {}))
        try:
            attrs["policy_properties"] = validate_properties(policy_units(policy), values or {})
        except DjangoValidationError as exc:
            raise serializers.ValidationError({"policy_properties": exc.messages}) from exc


class HostSerializer(ModelCleanSerializer):
    class Meta:
        model = Host
        fields = [
            "id",
            "name",
            "cluster",
            "uri",
            "description",
            "status",
            "status_detail",
            "reservable",
            "networks",
            "reported_networks",
            "cpus",
            "memory_mb",
            "cpu_usage_percent",
            "memory_used_mb",
            "last_seen_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["status", "status_detail"]

    def to_representation(self, host):
        data = super().to_representation(host)
        # Validation refuses passwords, but a row written some other way may hold one.
        data["uri"] = without_password(data["uri"])
        return data

    def validate_cluster(self, cluster):
        moving = self.instance is not None and cluster.pk != self.instance.cluster_id
        if moving and self.instance.vms.exists():
            raise serializers.ValidationError(
                "A host with VMs cannot move to another cluster; move its VMs first."
            )
        return cluster


class TemplateSerializer(ModelCleanSerializer):
    class Meta:
        model = Template
        fields = [
            "id",
            "name",
            "description",
            "cluster",
            "vcpus",
            "memory_mb",
            "disk_gb",
            "networks",
            "os_type",
            "created_at",
            "updated_at",
        ]


HARDWARE_FIELDS = ("vcpus", "memory_mb", "disk_gb")


class VirtualMachineSerializer(ModelCleanSerializer):
    owner = serializers.SlugRelatedField(
        slug_field="username", read_only=True, help_text="The user holding the VM; null: nobody."
    )
    cluster = ScopedRelatedField(
        queryset=Cluster.objects.all(),
        required=False,
        help_text="Required, unless the VM is launched into a reservation (its hosts' cluster).",
    )
    vcpus = serializers.IntegerField(required=False, min_value=1, max_value=512)
    memory_mb = serializers.IntegerField(required=False, min_value=16, max_value=16 * 1024 * 1024)
    disk_gb = serializers.IntegerField(required=False, min_value=1, max_value=64 * 1024)

    class Meta:
        model = VirtualMachine
        fields = [
            "id",
            "name",
            "description",
            "uuid",
            "cluster",
            "host",
            "template",
            "pool",
            "reservation",
            "owner",
            "vcpus",
            "memory_mb",
            "disk_gb",
            "status",
            "power_state",
            "power_state_updated_at",
            "power_state_update_count",
            "power_host",
            "created_at",
            "updated_at",
        ]
        read_only_fields = [
            "host",
            "pool",
            "status",
            "power_state",
            "power_state_updated_at",
            "power_state_update_count",
            "power_host",
        ]

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None and not isinstance(self.instance, list):
            # Where a VM lives and what it was made from are fixed once it exists.
            for name in ("cluster", "template", "reservation"):
                fields[name].read_only = True
        return fields

    def validate_reservation(self, reservation):
        """A VM may join a reservation of an active lease, within its amount and size."""
        if reservation is None:
            return None
        lease = reservation.lease
        if lease.status != "ACTIVE":
            raise serializers.ValidationError(
                f"Lease {lease.name} is not active; launch from {lease.start_date:%Y-%m-%d %H:%M}"
                f" to {lease.end_date:%Y-%m-%d %H:%M}."
            )
        instances = reservation.resource_type == "virtual:instance"
        if instances and reservation.vms.count() >= (reservation.amount or 0):
            raise serializers.ValidationError(
                f"The reservation's {reservation.amount} instances are all launched."
            )
        return reservation

    def _derive_cluster(self, attrs) -> None:
        """A VM launched into a reservation goes to the cluster of the reserved hosts."""
        if attrs.get("cluster") is not None:
            return
        reservation = attrs.get("reservation")
        if reservation is None:
            raise serializers.ValidationError({"cluster": "This field is required."})
        host = reservation.allocations.select_related("host__cluster").first()
        if host is None:
            raise serializers.ValidationError({"reservation": "The reservation holds no hosts."})
        attrs["cluster"] = host.host.cluster

    def _fit_reservation(self, attrs, reservation) -> None:
        errors = _fit_reservation_errors(attrs, reservation)
        if errors:
            raise serializers.ValidationError(errors)

    def prepare(self, attrs):
        if self.instance is None:
            self._derive_cluster(attrs)
        template = attrs.get("template")
        if self.instance is None and template is not None:
            for name in HARDWARE_FIELDS:
                attrs.setdefault(name, getattr(template, name))
        reservation = attrs.get("reservation")
        if self.instance is None and reservation is not None:
            self._fit_reservation(attrs, reservation)
        if self.instance is not None and self.instance.status != VmStatus.DOWN:
            changed = [
                n for n in HARDWARE_FIELDS if n in attrs and attrs[n] != getattr(self.instance, n)
            ]
            if changed:
                raise serializers.ValidationError(
                    {n: "Shut the VM down before changing its hardware." for n in changed}
                )


def _fit_reservation_errors(attrs, reservation) -> dict:
    errors = {}
    if reservation.resource_type == "virtual:instance":
        for name in ("vcpus", "memory_mb"):
            if attrs.get(name) and attrs[name] > (getattr(reservation, name) or 0):
                errors[name] = f"The reservation holds {getattr(reservation, name)} per instance."
    clusters = set(reservation.allocations.values_list("host__cluster_id", flat=True))
    if attrs.get("cluster") is not None and attrs["cluster"].pk not in clusters:
        errors["cluster"] = "The reservation's hosts are in another cluster."
    return errors


class JobSerializer(serializers.ModelSerializer):
    requested_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        help_text="Who asked for the job; null: Corral itself (a monitor, the balancer, a lease).",
    )
    error = serializers.SerializerMethodField()
    journal = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "vm",
            "host",
            "target_name",
            "params",
            "state",
            "progress",
            "step",
            "result",
            "error",
            "journal",
            "requested_by",
            "coalesced",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "worker",
        ]
        read_only_fields = fields

    def get_error(self, job: Job) -> dict | None:
        if not job.error_code:
            return None
        return {"code": job.error_code, "message": job.error_message}

    def get_journal(self, job: Job) -> list[dict]:
        return [{"at": line.at, "message": line.message} for line in job.journal.all()]


class MigrateSerializer(serializers.Serializer):
    host = ScopedRelatedField(
        queryset=Host.objects.all(),
        required=False,
        allow_null=True,
        help_text="Destination host; omit to let Corral choose.",
    )


class ExternalDomainSerializer(serializers.ModelSerializer):
    class Meta:
        model = ExternalDomain
        fields = ["id", "host", "uuid", "name", "power_state", "first_seen_at", "updated_at"]
        read_only_fields = fields


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "kind", "object_type", "object_id", "message", "data", "created_at"]
        read_only_fields = fields


class EventFeedSerializer(serializers.Serializer):
    token = serializers.IntegerField(help_text="Pass as ?since= to get what comes next.")
    events = EventSerializer(many=True)


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
