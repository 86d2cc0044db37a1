"""The inventory: clusters of libvirt hosts, VM templates and the VMs made from them."""

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from hosts import checks
from hosts.driver import HostProblem, uris
from hosts.models.images import ImageStatus
from hosts.validators import (
    validate_bridge_name,
    validate_kernel_cmdline,
    validate_libvirt_uri,
    validate_login_user,
    validate_migration_address,
    validate_network_names,
    validate_storage_path,
    validate_user_data,
)
from project.json_input import validate_flat_properties
from project.names import validate_object_name

GIB = 1024**3


def still_saving(image) -> str:
    """Why a template or a VM may not name an image being made from a VM yet."""
    return f"Image {image.name} is still being made from a VM; use it once it is ready."


class Cluster(models.Model):
    """Hosts that share a scheduling policy; VMs and pools live in one cluster."""

    name = models.CharField(max_length=64, unique=True, validators=[validate_object_name])
    description = models.TextField(blank=True, max_length=2000)
    policy = models.ForeignKey(
        "scheduling.Policy",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="clusters",
        help_text="Scheduling policy; empty means the default policy.",
    )
    policy_properties = models.JSONField(
        default=dict, blank=True, help_text="Overrides of the policy's property values."
    )
    memory_overcommit_percent = models.PositiveIntegerField(
        default=100,
        validators=[MinValueValidator(100), MaxValueValidator(400)],
        help_text="How much of a host's memory VMs may be given: 100 = none overcommitted.",
    )
    cpu_overcommit_ratio = models.FloatField(
        default=4.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(64.0)],
        help_text="How many vCPUs VMs may have per host CPU.",
    )
    restart_elsewhere = models.BooleanField(
        default=False,
        help_text="When a host is confirmed down, start every VM that ran on it on other hosts "
        "(without this, only its highly available VMs).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    grant_scopes = {"cluster": "pk"}

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


MAX_GUEST_SSH_PORTS = 1000


class HostStatus(models.TextChoices):
    CONNECTING = "connecting", "Connecting"
    UP = "up", "Up"
    MAINTENANCE = "maintenance", "Maintenance"
    NON_RESPONSIVE = "non_responsive", "Not responding"
    ERROR = "error", "Error"


class HostStatusReason(models.TextChoices):
    """Why a host is Not responding or Error, in a word (empty while it is Up): nothing
    answers, or it answered and would not let Corral in, or Corral never opens its URI."""

    NONE = "", "—"
    UNREACHABLE = HostProblem.UNREACHABLE, "Unreachable"
    AUTH_REFUSED = HostProblem.AUTH_REFUSED, "Authentication refused"
    HOST_KEY_CHANGED = HostProblem.HOST_KEY_CHANGED, "Host key changed"
    HOST_KEY_UNKNOWN = HostProblem.HOST_KEY_UNKNOWN, "Host key unknown"
    LIBVIRT_REFUSED = HostProblem.LIBVIRT_REFUSED, "libvirt refused"
    URI_REFUSED = "uri_refused", "URI refused"


class Host(models.Model):
    """A libvirt host, reached by its URI. Capacity and usage are read from the host itself."""

    name = models.CharField(max_length=64, validators=[validate_object_name])
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="hosts")
    uri = models.CharField(
        "libvirt URI", max_length=512, unique=True, validators=[validate_libvirt_uri]
    )
    description = models.TextField(blank=True, max_length=2000)
    status = models.CharField(
        max_length=20, choices=HostStatus.choices, default=HostStatus.CONNECTING
    )
    status_detail = models.CharField(max_length=500, blank=True)
    status_reason = models.CharField(
        max_length=32,
        choices=HostStatusReason.choices,
        blank=True,
        editable=False,
        help_text="Why the host is Not responding or Error: unreachable, authentication "
        "refused, host key changed or unknown, libvirt refused, URI refused (empty when Up).",
    )
    reservable = models.BooleanField(
        default=False, help_text="Reserved for leases: only VMs of an active reservation run here."
    )
    networks = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_network_names],
        help_text="Networks the host offers, by name.",
    )
    # Capacity and usage, as the host last reported them (null until it has).
    cpus = models.PositiveIntegerField("CPUs", null=True, blank=True, editable=False)
    memory_mb = models.PositiveBigIntegerField(
        "memory (MiB)", null=True, blank=True, editable=False
    )
    cpu_usage_percent = models.FloatField("CPU in use (%)", null=True, blank=True, editable=False)
    memory_used_mb = models.PositiveBigIntegerField(
        "memory in use (MiB)", null=True, blank=True, editable=False
    )
    capabilities = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_flat_properties],
        help_text='What the host offers, for leases that ask for it: {"gpu": "a100", "ssd": true}.',
    )
    reported_networks = models.JSONField(
        default=list, blank=True, editable=False, help_text="Networks libvirt reports on the host."
    )
    last_seen_at = models.DateTimeField(null=True, blank=True, editable=False)
    overloaded_since = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Since when its CPU load is too high."
    )
    storage_pool = models.CharField(
        max_length=64,
        default="corral",
        validators=[validate_object_name],
        help_text="The libvirt storage pool holding the VMs' disks and the images.",
    )
    storage_path = models.CharField(
        max_length=255,
        blank=True,
        validators=[validate_storage_path],
        help_text="Where Corral makes the pool (a directory pool) when the host has none.",
    )
    storage_capacity_bytes = models.PositiveBigIntegerField(
        "storage capacity (bytes)", null=True, blank=True, editable=False
    )
    storage_free_bytes = models.PositiveBigIntegerField(
        "free storage (bytes)", null=True, blank=True, editable=False
    )
    shared_storage = models.CharField(
        max_length=64,
        blank=True,
        validators=[validate_object_name],
        help_text="The shared storage (an NFS export, say) the host's pool folder is on, by a "
        "name of your choosing, when other hosts' pools are that same folder: hosts of the "
        "same name move VMs between them without copying disks, and hold each image once. "
        "Empty: the pool is the host's own. Checked against what the hosts show.",
    )
    # The host's mark in its pool's folder (a volume named after it): the hosts that see it
    # there share that folder (hosts/sync/shared_storage.py). A new one whenever the host's
    # storage settings change, so a mark left in a folder it no longer uses counts no more.
    storage_marker = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    storage_problem = models.CharField(
        max_length=500,
        blank=True,
        editable=False,
        help_text="What the last check of its pool's folder found at odds with its shared "
        "storage setting; empty: none.",
    )
    storage_checked_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When its pool's folder was last checked."
    )
    migration_address = models.CharField(
        max_length=253,
        blank=True,
        validators=[validate_migration_address],
        help_text="The host name or IP address other hosts send this host's incoming "
        "migrations to (memory and disks). Empty: the host name of its URI.",
    )
    ssh_host_key = models.TextField(
        "trusted SSH host key",
        blank=True,
        editable=False,
        help_text="The host key an admin confirmed for a host reached over SSH; Corral "
        "connects to no other.",
    )
    ssh_host_key_offered = models.TextField(
        "offered SSH host key",
        blank=True,
        editable=False,
        help_text="The key the host offers, when no key is trusted yet or it differs from the "
        "trusted one: compare its fingerprint, then trust it.",
    )
    guest_ssh_port_min = models.PositiveIntegerField(
        "first guest SSH port",
        null=True,
        blank=True,
        validators=[MinValueValidator(1024), MaxValueValidator(65535)],
        help_text="For guests with only a user-mode NIC: each one's SSH port is published on "
        "the host, on a port from this range (on the loopback of a host on Corral's own "
        "machine, on every address of a remote host: open the range in its firewall).",
    )
    guest_ssh_port_max = models.PositiveIntegerField(
        "last guest SSH port",
        null=True,
        blank=True,
        validators=[MinValueValidator(1024), MaxValueValidator(65535)],
    )
    domain_type = models.CharField(
        max_length=16, blank=True, editable=False, help_text="kvm, or qemu (TCG) without KVM."
    )
    machine = models.CharField(max_length=64, blank=True, editable=False)
    emulator = models.CharField(max_length=255, blank=True, editable=False)
    # Which task cluster syncs the host, and until when (hosts/sync/shard.py); "" for none.
    sync_owner = models.CharField(max_length=64, blank=True, default="", editable=False)
    sync_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    non_responsive_since = models.DateTimeField(
        "not responding since",
        null=True,
        blank=True,
        editable=False,
        help_text="Since when it has not answered.",
    )
    confirmed_down_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When an admin confirmed it down (off, fenced): its VMs run elsewhere since.",
    )
    confirmed_down_by = models.CharField(
        max_length=200,
        blank=True,
        default="",
        editable=False,
        help_text="Who or what confirmed it down: an admin's name, or the fence hooks that ran.",
    )
    fence_tried_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When its host-fence hooks ran in this outage (once per outage).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    grant_scopes = {"cluster": "cluster_id"}

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"],
                name="host_name_unique_in_cluster",
                violation_error_message="A host with this name exists in the cluster already.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def migration_target(self) -> str:
        """Where other hosts send this host's incoming migrations: its migration address, else
        the host name of its URI; "" for a host on Corral's own machine without an address
        (libvirt's own choice: the name the host gives for itself)."""
        if self.migration_address:
            return self.migration_address
        return "" if uris.is_local(self.uri) else uris.host_name(self.uri)

    def sharing_storage(self) -> models.QuerySet:
        """The hosts set to share this host's pool folder, itself included (only itself when
        it shares none)."""
        if not self.shared_storage:
            return Host.objects.filter(pk=self.pk)
        return Host.objects.filter(shared_storage=self.shared_storage)

    def clean(self) -> None:
        self._clean_guest_ssh_ports()
        for rule in checks.host_rules:
            rule(self)

    def _clean_guest_ssh_ports(self) -> None:
        low, high = self.guest_ssh_port_min, self.guest_ssh_port_max
        if low is None and high is None:
            return
        if low is None or high is None:
            field = "guest_ssh_port_min" if low is None else "guest_ssh_port_max"
            raise ValidationError({field: "Give both ends of the range, or neither."})
        if low > high:
            raise ValidationError({"guest_ssh_port_max": "The range ends before it starts."})
        if high - low >= MAX_GUEST_SSH_PORTS:
            raise ValidationError(
                {"guest_ssh_port_max": f"At most {MAX_GUEST_SSH_PORTS} ports in the range."}
            )


class OsType(models.TextChoices):
    LINUX = "linux", "Linux"
    WINDOWS = "windows", "Windows"
    BSD = "bsd", "BSD"
    OTHER = "other", "Other"


class TemplateVisibility(models.TextChoices):
    """Who may use a template besides the admins of its cluster (``hosts.template_access``)."""

    PUBLIC = "public", "Public (everyone who may use templates where it is offered)"
    PRIVATE = "private", "Private (its owner and the admins)"


class Template(models.Model):
    """What a VM is made of: CPUs, memory, disk, networks and OS. Shared by all clusters
    unless it names one. The admins' templates have no owner; a user who may create VMs in a
    cluster makes templates of their own there, private to them and the cluster's admins."""

    name = models.CharField(max_length=64, unique=True, validators=[validate_object_name])
    description = models.TextField(blank=True, max_length=2000)
    cluster = models.ForeignKey(
        Cluster,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="templates",
        help_text="Leave empty to offer the template in every cluster.",
    )
    vcpus = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(512)]
    )
    memory_mb = models.PositiveIntegerField(
        default=1024, validators=[MinValueValidator(16), MaxValueValidator(16 * 1024 * 1024)]
    )
    disk_gb = models.PositiveIntegerField(
        default=10, validators=[MinValueValidator(1), MaxValueValidator(64 * 1024)]
    )
    networks = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_network_names],
        help_text="libvirt networks to put a NIC on, by name (default: its NAT network).",
    )
    bridge = models.CharField(
        max_length=15,
        blank=True,
        validators=[validate_bridge_name],
        help_text="A host bridge to put a NIC on, by name (br0). With neither networks nor a "
        "bridge, a VM gets a user-mode NIC only its host reaches.",
    )
    login_user = models.CharField(
        max_length=32,
        blank=True,
        validators=[validate_login_user],
        help_text="The guest's account its users log in to (debian, ubuntu, cloud-user…): "
        "their SSH keys are put in its authorized_keys through the guest agent.",
    )
    os_type = models.CharField(max_length=16, choices=OsType.choices, default=OsType.LINUX)
    disk_image = models.ForeignKey(
        "hosts.Image",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="disk_templates",
        limit_choices_to={"kind": "disk"},
        help_text="The base of each VM's disk; empty: a blank disk.",
    )
    kernel_image = models.ForeignKey(
        "hosts.Image",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="kernel_templates",
        limit_choices_to={"kind": "kernel"},
        help_text="Boot this kernel directly (with the initrd and command line below).",
    )
    initrd_image = models.ForeignKey(
        "hosts.Image",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="initrd_templates",
        limit_choices_to={"kind": "initrd"},
    )
    kernel_cmdline = models.CharField(
        max_length=1000, blank=True, validators=[validate_kernel_cmdline]
    )
    graphics = models.CharField(
        max_length=8, choices=[("vnc", "VNC"), ("none", "None")], default="vnc"
    )
    guest_agent = models.BooleanField(
        default=False, help_text="The guest runs the QEMU guest agent."
    )
    user_data = models.TextField(
        blank=True,
        max_length=65536,
        validators=[validate_user_data],
        help_text="cloud-init user-data (#cloud-config) every VM of the template gets, beside "
        "its user's SSH keys.",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="templates",
        help_text="The user who made it for themselves; none: the admins' (and those a deleted "
        "user left in use).",
    )
    visibility = models.CharField(
        max_length=8,
        choices=TemplateVisibility.choices,
        default=TemplateVisibility.PUBLIC,
        help_text="Public: everyone who may use templates where it is offered; private: its "
        "owner and the admins of its cluster. A user's template is private.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    grant_scopes = {"cluster": "cluster_id"}
    # A template without a cluster is offered in every cluster: whoever may use templates in
    # some cluster may use it.
    grant_shared_scopes = {"cluster"}
    grant_shared_actions = {"hosts.view_template"}

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {}
        for field, kind in (
            ("disk_image", "disk"),
            ("kernel_image", "kernel"),
            ("initrd_image", "initrd"),
        ):
            image = getattr(self, field)
            if image is not None and image.kind != kind:
                errors[field] = f"Image {image.name} is a {image.kind} image, not a {kind} image."
            elif image is not None and image.status == ImageStatus.SAVING:
                errors[field] = still_saving(image)
            elif image is not None and image.cluster_id not in (None, self.cluster_id):
                errors[field] = f"Image {image.name} is offered in another cluster only."
        if self.initrd_image_id and not self.kernel_image_id:
            errors["initrd_image"] = "An initrd boots only with a kernel image."
        if self.kernel_cmdline and not self.kernel_image_id:
            errors["kernel_cmdline"] = "A kernel command line needs a kernel image."
        if self.disk_image is not None and self.disk_image.virtual_size_bytes > self.disk_gb * GIB:
            errors["disk_gb"] = (
                f"The disk image holds {self.disk_image.virtual_size_bytes / GIB:.1f} GiB; "
                "the disk must be at least that big."
            )
        if self.owner_id is not None:
            errors = {**self._owned_errors(), **errors}
        if errors:
            raise ValidationError(errors)
        # Binding a template to one cluster must not strand the VMs and pools of other
        # clusters on a template that is no longer offered there.
        if self.pk is None or self.cluster_id is None:
            return
        elsewhere = [
            *self.vms.exclude(cluster_id=self.cluster_id).values_list("name", flat=True)[:5],
            *self.pools.exclude(cluster_id=self.cluster_id).values_list("name", flat=True)[:5],
        ]
        if elsewhere:
            raise ValidationError(
                {
                    "cluster": "VMs or pools in other clusters use this template: "
                    f"{', '.join(elsewhere)}."
                }
            )

    def _owned_errors(self) -> dict[str, str]:
        """What a user's template may not be: offered in every cluster, public, on a host
        bridge, or on networks its cluster's hosts do not offer (those are the admins' to
        choose)."""
        errors = {}
        if self.cluster_id is None:
            errors["cluster"] = (
                "A template of a user's own is offered in one cluster: choose it (templates "
                "for every cluster are the admins')."
            )
        if self.visibility != TemplateVisibility.PRIVATE:
            errors["visibility"] = "A user's template is private: only admins offer templates."
        if self.bridge:
            errors["bridge"] = "Only the admins' templates put VMs on a host bridge."
        if self.cluster_id is not None and self.networks:
            offered = offered_networks(self.cluster_id)
            missing = [name for name in self.networks if name not in offered]
            if missing:
                errors["networks"] = (
                    f"The hosts of cluster {self.cluster.name} offer no network "
                    f"{', '.join(missing)}; they offer {', '.join(sorted(offered)) or 'none'}."
                )
        return errors


def offered_networks(cluster_id: int) -> set[str]:
    """The networks the hosts of a cluster offer VMs (``Host.networks``, as the admins set
    them): those a user's template may name."""
    offered = set()
    for names in Host.objects.filter(cluster_id=cluster_id).values_list("networks", flat=True):
        offered.update(names or [])
    return offered


class VmStatus(models.TextChoices):
    """Lifecycle status. Stationary: down, up, paused, unknown. The others are transitional
    and only last while a job on the VM runs."""

    DOWN = "down", "Down"
    STARTING = "starting", "Starting"
    UP = "up", "Up"
    PAUSED = "paused", "Paused"
    SUSPENDING = "suspending", "Suspending"
    RESUMING = "resuming", "Resuming"
    STOPPING = "stopping", "Stopping"
    MIGRATING = "migrating", "Migrating"
    UNKNOWN = "unknown", "Unknown"


STATIONARY_STATUSES = {VmStatus.DOWN, VmStatus.UP, VmStatus.PAUSED, VmStatus.UNKNOWN}

# VMs in these states hold their host's resources (pending ones included: Starting).
HOLDING_STATUSES = [
    VmStatus.UP,
    VmStatus.PAUSED,
    VmStatus.STARTING,
    VmStatus.STOPPING,
    VmStatus.SUSPENDING,
    VmStatus.RESUMING,
    VmStatus.MIGRATING,
    VmStatus.UNKNOWN,
]


class PowerState(models.TextChoices):
    """The raw power state a host reports for a domain (libvirt's names), or why none came."""

    RUNNING = "running", "Running"
    BLOCKED = "blocked", "Blocked"
    PAUSED = "paused", "Paused"
    SHUTDOWN = "shutdown", "Shutting down"
    SHUTOFF = "shutoff", "Shut off"
    CRASHED = "crashed", "Crashed"
    PMSUSPENDED = "pmsuspended", "Suspended by guest"
    NOSTATE = "nostate", "No state"
    REPORT_MISSING = "report_missing", "Power report missing"
    UNKNOWN = "unknown", "Unknown"


class VirtualMachine(models.Model):
    """A virtual machine made from a template, in a cluster, running on a host when it runs.

    ``status`` is Corral's lifecycle view; ``power_state`` is what the host last reported,
    with when, how often in a row, and which host reported it.
    """

    name = models.CharField(max_length=64, validators=[validate_object_name])
    description = models.TextField(blank=True, max_length=2000)
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # The libvirt domain's name, recorded for VMs defined before domains were named from the
    # VM's UUID (their names were the VM's); empty for every other VM (see ``domain``).
    domain_name = models.CharField(max_length=64, blank=True, default="", editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="vms")
    host = models.ForeignKey(
        Host, on_delete=models.PROTECT, null=True, blank=True, related_name="vms"
    )
    template = models.ForeignKey(Template, on_delete=models.PROTECT, related_name="vms")
    pool = models.ForeignKey(
        "pools.VmPool", on_delete=models.PROTECT, null=True, blank=True, related_name="vms"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="vms",
    )
    reservation = models.ForeignKey(
        "leases.Reservation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="vms",
        help_text="The lease reservation the VM was launched into.",
    )
    pool_index = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The VM's number in its pool."
    )
    admin_hold = models.BooleanField(
        default=False,
        help_text="Held by an admin: a pool neither hands it out nor prestarts it.",
    )
    taken_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When its holder took it from its pool (empty while nobody holds it): its "
        "holder's page lists the jobs since, not those of the holders before.",
    )
    highly_available = models.BooleanField(
        default=False,
        help_text="Started on another host when its host is confirmed down.",
    )
    running_when_lost = models.BooleanField(
        default=False,
        editable=False,
        help_text="It ran when its host stopped answering (so it is restarted elsewhere).",
    )
    prestart_failures = models.PositiveIntegerField(
        default=0, editable=False, help_text="Prestarts that failed in a row."
    )
    prestart_retry_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="After a failed prestart, not prestarted again before this time (back-off).",
    )
    disk_image = models.ForeignKey(
        "hosts.Image",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="vms",
        limit_choices_to={"kind": "disk"},
        help_text="Boots from this disk image instead of its template's.",
    )
    user_data = models.TextField(
        blank=True,
        max_length=65536,
        help_text="cloud-init user-data of its own (a #cloud-config, a script or any part "
        "cloud-init reads), given to the guest beside its template's and its user's keys.",
    )
    vcpus = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(512)])
    memory_mb = models.PositiveIntegerField(
        validators=[MinValueValidator(16), MaxValueValidator(16 * 1024 * 1024)]
    )
    disk_gb = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(64 * 1024)]
    )
    status = models.CharField(max_length=16, choices=VmStatus.choices, default=VmStatus.DOWN)
    power_state = models.CharField(max_length=16, choices=PowerState.choices, blank=True)
    power_state_updated_at = models.DateTimeField(null=True, blank=True)
    power_state_update_count = models.PositiveIntegerField(default=0)
    power_host = models.ForeignKey(
        Host, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Percent of its vCPUs the VM used between the last two reports of its host (libvirt's
    # counters; None while it does not run or its host gives no counters).
    cpu_usage_percent = models.FloatField(null=True, blank=True, editable=False)
    pinned_host = models.ForeignKey(
        Host,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="pinned_vms",
        help_text="Run only on this host.",
    )
    migrating_to = models.ForeignKey(
        Host,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The destination while a migration runs (its resources are held there).",
    )
    ip_addresses = models.JSONField(
        default=list, blank=True, editable=False, help_text="The guest's addresses, as last read."
    )
    graphics_port = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The VNC port on its host, when running."
    )
    # The cloud-init seed on its host: when it was last written, and whose SSH keys it holds
    # (None: nobody's). A seed of someone other than the owner is rewritten
    # (hosts/guests/guestinfo.py).
    seed_written_at = models.DateTimeField(null=True, blank=True, editable=False)
    seed_keys_of = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # The port on its host's loopback that leads to the guest's SSH server (a host with a
    # guest SSH port range, hosts/guests/ssh.py); None elsewhere.
    ssh_port = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # The SSH keys in the running guest, as the guest agent last set them (hosts/guests/keys.py):
    # whose they are, the digest of the account and keys set, when, and why the holder's keys
    # are not there when they are not (empty when they are).
    guest_keys_of = models.PositiveIntegerField(null=True, blank=True, editable=False)
    guest_keys_digest = models.CharField(max_length=64, blank=True, editable=False)
    guest_keys_at = models.DateTimeField(null=True, blank=True, editable=False)
    guest_keys_note = models.CharField(max_length=500, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    grant_scopes = {
        "vm": "pk",
        "cluster": "cluster_id",
        "pool": "pool_id",
        "lease": "reservation__lease_id",
    }

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"],
                name="vm_name_unique_in_cluster",
                violation_error_message="A VM with this name exists in the cluster already.",
            )
        ]
        permissions = [
            ("operate_virtualmachine", "Can start, shut down, power off, suspend and resume"),
            ("migrate_virtualmachine", "Can migrate to another host"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def domain(self) -> str:
        """The name of the VM's libvirt domain: ``corral-<uuid>`` (as Nova names a domain
        after its instance's id, so that no domain Corral did not make, another tool's or one
        left by an earlier database, blocks it); the VM's name is the domain's title."""
        return self.domain_name or f"corral-{self.uuid}"

    def clean(self) -> None:
        errors = {}
        if self.template_id and self.cluster_id:
            template_cluster = (
                Template.objects.filter(pk=self.template_id)
                .values_list("cluster_id", flat=True)
                .first()
            )
            if template_cluster is not None and template_cluster != self.cluster_id:
                errors["template"] = "This template belongs to another cluster."
        if self.template_id and self.disk_gb:
            if self.disk_image_id:
                whose = "The disk image"
                base = self.disk_image.virtual_size_bytes
            else:
                whose = "The template's disk image"
                base = (
                    Template.objects.filter(pk=self.template_id)
                    .values_list("disk_image__virtual_size_bytes", flat=True)
                    .first()
                )
            if base and base > self.disk_gb * GIB:
                errors["disk_gb"] = (
                    f"{whose} holds {base / GIB:.1f} GiB; the disk must be at least that big."
                )
        if self.disk_image_id and self.disk_image.kind != "disk":
            errors["disk_image"] = "This image is not a disk image."
        elif self.disk_image_id and self.disk_image.status == ImageStatus.SAVING:
            errors["disk_image"] = still_saving(self.disk_image)
        if self.host_id and self.cluster_id:
            host_cluster = (
                Host.objects.filter(pk=self.host_id).values_list("cluster_id", flat=True).first()
            )
            if host_cluster is not None and host_cluster != self.cluster_id:
                errors["host"] = "This host is in another cluster."
        if errors:
            raise ValidationError(errors)
