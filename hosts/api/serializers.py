"""API representations of clusters, hosts, templates and VMs (field names as Blazar and oVirt)."""

from types import SimpleNamespace

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from hosts import checks, image_access, sshtrust, template_access
from hosts.capacity import schedulable
from hosts.error_codes import JobErrorCode
from hosts.guests import ssh
from hosts.host_words import clusters_read_by, job_cluster_id
from hosts.models import (
    Cluster,
    ExternalDomain,
    Host,
    Image,
    Job,
    Template,
    TemplateVisibility,
    VirtualMachine,
    VmStatus,
)
from hosts.services import NOT_HELD_OUTSIDE_POOLS
from hosts.validators import without_password
from project.api.serializers import ModelCleanSerializer, ScopedRelatedField
from project.errors import Refused


class ClusterSerializer(ModelCleanSerializer):
    host_count = serializers.IntegerField(read_only=True)
    vm_count = serializers.IntegerField(read_only=True)
    policy = serializers.PrimaryKeyRelatedField(
        queryset=Cluster._meta.get_field("policy").related_model.objects.all(),
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
            "restart_elsewhere",
            "host_count",
            "vm_count",
            "created_at",
            "updated_at",
        ]

    def prepare(self, attrs):
        for rule in checks.cluster_rules:
            rule(attrs, self.instance)


class HostSerializer(ModelCleanSerializer):
    vcpu_capacity = serializers.SerializerMethodField(
        help_text="The vCPUs VMs may be given here: cpus times the cluster's "
        "cpu_overcommit_ratio, what the scheduler and leases count; null until reported."
    )
    memory_capacity_mb = serializers.SerializerMethodField(
        help_text="The MiB VMs may be given here: memory_mb times the cluster's "
        "memory_overcommit_percent, what the scheduler and leases count; null until reported."
    )

    ssh_host_key_fingerprint = serializers.SerializerMethodField(
        help_text="SHA-256 fingerprint of the SSH host key Corral trusts for this host (a host "
        "reached over SSH); empty until an admin trusts one."
    )
    ssh_host_key_offered_fingerprint = serializers.SerializerMethodField(
        help_text="SHA-256 fingerprint of the key the host offers when Corral does not trust it "
        "(none trusted yet, or it changed): compare it with the host's own, then POST it to "
        "trust-host-key."
    )

    def get_ssh_host_key_fingerprint(self, host) -> str:
        return sshtrust.fingerprint(host.ssh_host_key)

    def get_ssh_host_key_offered_fingerprint(self, host) -> str:
        return sshtrust.fingerprint(host.ssh_host_key_offered)

    def get_vcpu_capacity(self, host) -> int | None:
        return schedulable(host.cluster, host.cpus, host.memory_mb).vcpus

    def get_memory_capacity_mb(self, host) -> int | None:
        return schedulable(host.cluster, host.cpus, host.memory_mb).memory_mb

    class Meta:
        model = Host
        fields = [
            "id",
            "name",
            "cluster",
            "uri",
            "description",
            "status",
            "status_reason",
            "status_detail",
            "reservable",
            "networks",
            "reported_networks",
            "cpus",
            "memory_mb",
            "vcpu_capacity",
            "memory_capacity_mb",
            "cpu_usage_percent",
            "memory_used_mb",
            "storage_pool",
            "storage_path",
            "shared_storage",
            "storage_problem",
            "storage_checked_at",
            "migration_address",
            "guest_ssh_port_min",
            "guest_ssh_port_max",
            "ssh_host_key_fingerprint",
            "ssh_host_key_offered_fingerprint",
            "storage_capacity_bytes",
            "storage_free_bytes",
            "domain_type",
            "machine",
            "emulator",
            "last_seen_at",
            "non_responsive_since",
            "confirmed_down_at",
            "confirmed_down_by",
            "fence_tried_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["status", "status_reason", "status_detail"]

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


class TrustHostKeySerializer(serializers.Serializer):
    fingerprint = serializers.CharField(
        max_length=100,
        help_text="The offered key's fingerprint (ssh_host_key_offered_fingerprint), as the "
        "admin compared it with the host's own: SHA256:….",
    )


class SshIdentitySerializer(serializers.Serializer):
    public_key = serializers.CharField(
        help_text="Corral's SSH public key: put it in the authorized_keys of the account its "
        "hosts' qemu+ssh URIs name."
    )
    fingerprint = serializers.CharField(help_text="Its SHA-256 fingerprint.")


class VisibleImageField(ScopedRelatedField):
    """An image the caller may see (``hosts.image_access.visible``); others do not exist."""

    def get_queryset(self):
        request = self.context.get("request")
        if request is None:
            return Image.objects.none()
        return image_access.visible(request.user, Image.objects.all())


def _image_field(kind: str) -> ScopedRelatedField:
    # Any visible image: one of the wrong kind is named as such by the model's clean().
    return VisibleImageField(
        queryset=Image.objects.all(),
        required=False,
        allow_null=True,
        help_text=f"Id of a {kind} image; null: none.",
    )


class TemplateSerializer(ModelCleanSerializer):
    """A template. Made by an admin where they may add templates, it is the admins' (no owner,
    public unless asked); made by anyone else who may create VMs in its cluster, it is theirs
    (``owner``: the caller, private, in that cluster only). With ``own`` in the context, an
    admin makes one of their own too (the portal's My templates)."""

    disk_image = _image_field("disk")
    kernel_image = _image_field("kernel")
    initrd_image = _image_field("initrd")
    owner = serializers.PrimaryKeyRelatedField(
        read_only=True,
        help_text="Set to the caller when they make the template as a user (not an admin where "
        "it is offered): theirs to change and delete, seen only by them and the cluster's "
        "admins. null: the admins'.",
    )
    owner_name = serializers.CharField(source="owner.username", read_only=True, allow_null=True)
    visibility = serializers.ChoiceField(
        choices=TemplateVisibility.choices,
        required=False,
        help_text="public: everyone who may use templates where it is offered; private: its "
        "owner and the cluster's admins. A user's template is private; admins choose for "
        "theirs (default public).",
    )

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
            "disk_image",
            "kernel_image",
            "initrd_image",
            "kernel_cmdline",
            "graphics",
            "guest_agent",
            "login_user",
            "bridge",
            "user_data",
            "owner",
            "owner_name",
            "visibility",
            "created_at",
            "updated_at",
        ]

    def prepare(self, attrs):
        if self.instance is not None:
            return
        request = self.context.get("request")
        owner = template_access.owner_of_new(
            getattr(request, "user", None), attrs.get("cluster"), own=self.context.get("own", False)
        )
        if owner is not None:
            attrs["owner"] = owner
            attrs.setdefault("visibility", TemplateVisibility.PRIVATE)


class ConsoleTicketSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="Open this websocket (noVNC) within seconds, once.")
    expires_at = serializers.DateTimeField()


class SerialTicketSerializer(serializers.Serializer):
    url = serializers.CharField(
        help_text="Open this websocket within seconds, once: its binary frames carry the "
        "terminal's raw bytes both ways (text frames sent to it are typed as UTF-8)."
    )
    expires_at = serializers.DateTimeField()


HARDWARE_FIELDS = ("vcpus", "memory_mb", "disk_gb")


class SshDetailsSerializer(serializers.Serializer):
    user = serializers.CharField(help_text="The guest's login account (the template's).")
    host = serializers.CharField(help_text="The address to connect to.")
    port = serializers.IntegerField()
    command = serializers.CharField(help_text="Ready to copy: ssh [-p PORT] USER@HOST.")


class GuestKeysSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=["in_guest", "pending", "not_in_guest", "at_boot"],
        help_text="in_guest: the holder's keys are in the running guest; pending: a job puts "
        "them there; not_in_guest: they are not (message says why, and that they arrive at the "
        "next boot); at_boot: the template's guests take keys from cloud-init at boot only.",
    )
    message = serializers.CharField()


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
    admin_hold = serializers.BooleanField(
        required=False,
        help_text="Held for the admins: its pool neither hands it out nor counts it as "
        "prestarted. Set when someone other than its user starts a pool's VM; those who may "
        "change the VM release it.",
    )
    host_name = serializers.CharField(
        source="host.name",
        read_only=True,
        allow_null=True,
        help_text="The name of the host it is placed on (host is that host's id); null: none.",
    )
    ssh = serializers.SerializerMethodField(
        help_text="How its user logs in by SSH; null until the guest runs with an address "
        "Corral can name and its template names a login account."
    )
    guest_keys = serializers.SerializerMethodField(
        help_text="Whether its user's SSH keys are in the running guest; null when nobody holds "
        "it or it does not run."
    )

    @extend_schema_field(SshDetailsSerializer(allow_null=True))
    def get_ssh(self, vm) -> dict | None:
        found = ssh.details(vm)
        return found.as_dict() if found is not None else None

    @extend_schema_field(GuestKeysSerializer(allow_null=True))
    def get_guest_keys(self, vm) -> dict | None:
        request = self.context.get("request")
        found = ssh.keys_state(vm, getattr(getattr(request, "user", None), "pk", None))
        return found.as_dict() if found is not None else None

    class Meta:
        model = VirtualMachine
        fields = [
            "id",
            "name",
            "description",
            "uuid",
            "cluster",
            "host",
            "host_name",
            "template",
            "pool",
            "reservation",
            "owner",
            "admin_hold",
            "highly_available",
            "vcpus",
            "memory_mb",
            "disk_gb",
            "status",
            "power_state",
            "power_state_updated_at",
            "power_state_update_count",
            "power_host",
            "cpu_usage_percent",
            "ip_addresses",
            "ssh",
            "guest_keys",
            "created_at",
            "updated_at",
        ]
        read_only_fields = [
            "host",
            "ip_addresses",
            "pool",
            "status",
            "power_state",
            "power_state_updated_at",
            "power_state_update_count",
            "power_host",
            "cpu_usage_percent",
        ]

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None and not isinstance(self.instance, list):
            # Where a VM lives and what it was made from are fixed once it exists.
            for name in ("cluster", "template", "reservation"):
                fields[name].read_only = True
        return fields

    def prepare(self, attrs):
        template = attrs.get("template")
        if self.instance is None and template is not None:
            for name in HARDWARE_FIELDS:
                attrs.setdefault(name, getattr(template, name))
        if self.instance is None:
            for rule in checks.launch_rules:
                try:
                    rule(attrs)
                except Refused as refused:
                    # As a field error, so that a form validating through this serializer (the
                    # portal's launch form) shows it as the API does.
                    raise serializers.ValidationError(
                        {refused.field or api_settings.NON_FIELD_ERRORS_KEY: [refused.message]},
                        code=refused.code,
                    ) from refused
            if attrs.get("cluster") is None:
                raise serializers.ValidationError({"cluster": "This field is required."})
        held_before = self.instance.admin_hold if self.instance is not None else False
        in_pool = self.instance is not None and self.instance.pool_id is not None
        if attrs.get("admin_hold", held_before) != held_before and not in_pool:
            name = self.instance.name if self.instance is not None else attrs.get("name", "")
            raise serializers.ValidationError(
                {"admin_hold": NOT_HELD_OUTSIDE_POOLS.format(vm=SimpleNamespace(name=name))}
            )
        if self.instance is not None and self.instance.status != VmStatus.DOWN:
            changed = [
                n for n in HARDWARE_FIELDS if n in attrs and attrs[n] != getattr(self.instance, n)
            ]
            if changed:
                raise serializers.ValidationError(
                    {n: "Shut the VM down before changing its hardware." for n in changed}
                )


class JobErrorSerializer(serializers.Serializer):
    """Why the job failed: a stable code and words for people; the hosts' own words too, for
    those who may see the hosts."""

    code = serializers.ChoiceField(choices=JobErrorCode.choices())
    message = serializers.CharField()
    detail = serializers.CharField(
        required=False,
        help_text="What the hosts said (their URIs, libvirt's own text), one line per host: "
        "only to those who may see the hosts of the job's cluster, and only when a host said "
        "something.",
    )


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

    @extend_schema_field(JobErrorSerializer(allow_null=True))
    def get_error(self, job: Job) -> dict | None:
        if not job.error_code:
            return None
        error = {"code": job.error_code, "message": job.error_message}
        if job.error_detail and job_cluster_id(job) in self._clusters_read():
            error["detail"] = job.error_detail
        return error

    def _clusters_read(self) -> set[int]:
        """The clusters whose hosts' words the caller reads: asked once per request, and only
        when a job has any (none without a request)."""
        request = self.context.get("request")
        if request is None:
            return set()
        if not hasattr(request, "_corral_clusters_read"):
            request._corral_clusters_read = clusters_read_by(request.user)
        return request._corral_clusters_read

    def get_journal(self, job: Job) -> list[dict]:
        return [{"at": line.at, "message": line.message} for line in job.journal.all()]


class AfterStopSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="returned_to_pool: the VM goes back to its pool as it is, and whoever held "
        "it loses it; returned_and_reverted: it goes back and its disk is reverted to its "
        "stateless pool's base, everything written to it since it was taken lost; reverted: "
        "an unheld VM of a stateless pool is reverted to its base."
    )
    message = serializers.CharField(help_text="The same, in words for people.")


class StopJobSerializer(JobSerializer):
    """The job of a shutdown or power off, and what follows once the VM stops."""

    after_stop = serializers.SerializerMethodField(
        help_text="What follows once the VM stops, besides stopping: null when nothing does. "
        "A VM of an automatic pool goes back to its pool when it stops, its disk reverted "
        "when the pool is stateless."
    )

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "after_stop"]
        read_only_fields = fields

    @extend_schema_field(AfterStopSerializer(allow_null=True))
    def get_after_stop(self, job: Job) -> dict | None:
        found = self.context.get("after_stop")
        return found.as_dict() if found is not None else None


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
