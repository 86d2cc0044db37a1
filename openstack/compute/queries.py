"""What Nova's API reads of Corral's rows: the flavors a caller may use, the VMs they see as
servers, each one's start history (one query over their jobs), the server row that speaks for
a VM, the server groups they see or name (affinity groups, and the groups of instance
reservations), the availability zones they may use, and the hosts an admin sees as hypervisors.

Flavors are Corral's templates and the flavors Blazar makes for instance reservations. Each
template a user may use (``hosts.template_access.visible``) is a flavor of its size, its id the
template's name (a name of digits only would read as a reservation's id: such a template's id is
``template:<name>``): public for a public template, private for a private one (a user's own
template, listed for them and the admins of its cluster, as Nova lists a private flavor for the
projects given access to it).
Each instance reservation of an active lease is the private flavor Blazar makes for it, seen by
the lease's project (its owner) only while the lease is active: id the reservation's id, name
``reservation:<id>``, extra specs ``aggregate_instance_extra_specs:reservation`` and, with an
affinity rule, ``affinity_id`` (the reservation's server group). Booting with it launches into
the reservation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.db.models import Exists, OuterRef, Q

from hosts import template_access
from hosts.models import (
    Cluster,
    Host,
    HostStatus,
    Job,
    JobKind,
    JobState,
    Template,
    TemplateVisibility,
    VirtualMachine,
)
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.usage import with_usage
from leases.models import Allocation, LeaseStatus, Reservation, ResourceType
from openstack.compute.group_ids import affinity_group_id, affinity_group_key, reservation_group_id
from openstack.models import Server
from pools.models import VmPool
from project.access.permissions import grant_condition, holds, restrict
from scheduling.models import AffinityGroup, AffinityRule

RESERVATION_SPEC = "aggregate_instance_extra_specs:reservation"


@dataclass
class Flavor:
    id: str
    name: str
    vcpus: int
    ram: int
    disk: int
    is_public: bool
    template: Template | None = None
    reservation: Reservation | None = None
    extra_specs: dict = field(default_factory=dict)


def template_flavor_id(template: Template) -> str:
    return f"template:{template.name}" if template.name.isdigit() else template.name


def template_flavor(template: Template) -> Flavor:
    return Flavor(
        id=template_flavor_id(template),
        name=template.name,
        vcpus=template.vcpus,
        ram=template.memory_mb,
        disk=template.disk_gb,
        is_public=template.visibility == TemplateVisibility.PUBLIC,
        template=template,
    )


def reservation_flavor(reservation: Reservation) -> Flavor:
    specs = {RESERVATION_SPEC: str(reservation.pk)}
    group = reservation_group_id(reservation)
    if group is not None:
        specs["affinity_id"] = group
    return Flavor(
        id=str(reservation.pk),
        name=f"reservation:{reservation.pk}",
        vcpus=reservation.vcpus or 0,
        ram=reservation.memory_mb or 0,
        disk=reservation.disk_gb or 0,
        is_public=False,
        reservation=reservation,
        extra_specs=specs,
    )


def pool_templates(user):
    """The templates of the pools ``user`` may take VMs from: a pool user launches them (as
    ``server create`` with the pool's flavor and image, which hands over a pool's VM) without
    any grant on templates."""
    pools = restrict(VmPool.objects.all(), user, "pools.allocate_vmpool")
    return Template.objects.filter(pools__in=pools)


def usable_templates(user):
    """The templates ``user`` may launch: those they may see, and their pools'."""
    seen = template_access.visible(user)
    pooled = Template.objects.filter(pk__in=pool_templates(user).values("pk"))
    return (seen | pooled).select_related("disk_image", "cluster", "owner")


def active_instance_reservations():
    """The instance reservations of active leases: each is a private flavor."""
    return Reservation.objects.filter(
        resource_type=ResourceType.INSTANCE, lease__status=LeaseStatus.ACTIVE
    ).select_related("lease")


def reservations_of(user):
    """The instance reservations of the user's active leases (their private flavors)."""
    return active_instance_reservations().filter(lease__owner=user)


def visible_flavors(user) -> list[Flavor]:
    templates = [template_flavor(t) for t in usable_templates(user).order_by("name")]
    reserved = [reservation_flavor(r) for r in reservations_of(user).order_by("pk")]
    return templates + reserved


def reference(ref) -> str:
    """A flavor or image reference: an id, or a URL that ends with one."""
    text = str(ref or "").strip()
    if "://" in text or text.startswith("/"):
        text = urlsplit(text).path.rstrip("/").rsplit("/", 1)[-1]
    return text


def find_flavor(user, ref) -> Flavor | None:
    """The flavor ``ref`` names, if the caller may use it."""
    ident = reference(ref)
    if ident.isdigit() and len(ident) < 19:
        found = reservations_of(user).filter(pk=int(ident)).first()
        return reservation_flavor(found) if found is not None else None
    name = ident.removeprefix("template:") if ident.startswith("template:") else ident
    if not name or (name.isdigit() and not ident.startswith("template:")):
        return None
    found = usable_templates(user).filter(name=name).first()
    return template_flavor(found) if found is not None else None


VIEW = "hosts.view_virtualmachine"
VIEW_GROUP = "scheduling.view_affinitygroup"
CHANGE_GROUP = "scheduling.change_affinitygroup"
POLICIES = {
    (AffinityRule.POSITIVE, True): "affinity",
    (AffinityRule.NEGATIVE, True): "anti-affinity",
    (AffinityRule.POSITIVE, False): "soft-affinity",
    (AffinityRule.NEGATIVE, False): "soft-anti-affinity",
}


def visible_vms(user):
    return restrict(
        VirtualMachine.objects.select_related(
            "template__disk_image",
            "disk_image",
            "host",
            "cluster",
            "owner",
            "server",
            "reservation",
        ),
        user,
        VIEW,
    )


@dataclass
class StartHistory:
    """What a VM's start jobs say: whether one ever succeeded, the last one, and whether a
    deletion is queued or an image of its disk under way."""

    started: bool = False
    last_state: str = ""
    last_error: str = ""
    last_finished_at: object = None
    deleting: bool = False
    imaging: bool = False


def start_histories(vm_ids: list[int]) -> dict[int, StartHistory]:
    """The start history of each VM, in one query."""
    histories = {vm_id: StartHistory() for vm_id in vm_ids}
    if not vm_ids:
        return histories
    rows = (
        Job.objects.filter(
            vm_id__in=vm_ids, kind__in=[JobKind.START, JobKind.DELETE, JobKind.IMAGE_FROM_VM]
        )
        .order_by("id")
        .values_list("vm_id", "kind", "state", "error_message", "finished_at")
    )
    for vm_id, kind, state, error, finished_at in rows:
        history = histories[vm_id]
        if kind == JobKind.DELETE:
            history.deleting = history.deleting or state in ACTIVE_JOB_STATES
            continue
        if kind == JobKind.IMAGE_FROM_VM:
            history.imaging = history.imaging or state in ACTIVE_JOB_STATES
            continue
        history.started = history.started or state == JobState.SUCCEEDED
        history.last_state, history.last_error = state, error
        history.last_finished_at = finished_at
    return histories


def start_history(vm: VirtualMachine | None) -> StartHistory | None:
    """One VM's start history (None for a server that never became a VM)."""
    return start_histories([vm.pk])[vm.pk] if vm is not None else None


def record_of(vm: VirtualMachine) -> Server | None:
    """The server row that speaks for the VM: its holder's (a pool's VM handed to another user
    since, or returned, is named afresh)."""
    record = getattr(vm, "server", None) if hasattr(vm, "server") else None
    if record is not None and record.owner_id != vm.owner_id:
        return None
    return record


@dataclass
class ServerGroup:
    """A server group as Nova's API shows it, and the Corral object behind it: an affinity
    group, or an instance reservation (exactly one of the two is set)."""

    id: str
    name: str
    policy: str  # affinity, anti-affinity, soft-affinity or soft-anti-affinity
    members: list[str] = field(default_factory=list)  # the VMs' UUIDs
    affinity_group: AffinityGroup | None = None
    reservation: Reservation | None = None
    user_id: str = ""
    project_id: str = ""
    may_add_members: bool = False  # whether the caller may put a VM into it


def _affinity_server_group(group: AffinityGroup) -> ServerGroup:
    nova = getattr(group, "nova_server_group", None)
    creator = str(nova.user_id) if nova is not None and nova.user_id is not None else ""
    return ServerGroup(
        id=affinity_group_id(group),
        name=nova.name if nova is not None else group.name,
        policy=POLICIES.get((group.vm_rule, group.vm_enforcing), ""),
        members=[str(vm.uuid) for vm in group.vms.all()],
        affinity_group=group,
        user_id=creator,
        project_id=creator,
    )


def _reservation_server_group(reservation: Reservation) -> ServerGroup:
    owner = str(reservation.lease.owner_id)
    return ServerGroup(
        id=reservation_group_id(reservation),
        name=f"reservation:{reservation.pk}",
        policy="affinity" if reservation.affinity else "anti-affinity",
        members=[str(vm.uuid) for vm in reservation.vms.all()],
        reservation=reservation,
        user_id=owner,
        project_id=owner,
        may_add_members=True,
    )


def made_by(user, group: AffinityGroup) -> bool:
    """Whether ``user`` made ``group`` through Nova's API (so owns it as Nova's groups are
    owned)."""
    nova = getattr(group, "nova_server_group", None)
    return nova is not None and nova.user_id is not None and nova.user_id == user.pk


def _visible_affinity_groups(user):
    """The affinity groups ``user`` may see, and those they made through Nova's API."""
    groups = AffinityGroup.objects.all()
    if not user.is_superuser:  # (a superuser's grant condition is empty: it would OR to "own")
        own = Q(nova_server_group__user=user) if user.is_authenticated else Q(pk__in=[])
        groups = groups.filter(grant_condition(AffinityGroup, user, VIEW_GROUP) | own)
    return groups.select_related("nova_server_group", "cluster").prefetch_related("vms")


def _reservations_with_groups(user):
    return (
        reservations_of(user).filter(affinity__isnull=False).order_by("pk").prefetch_related("vms")
    )


def visible_groups(user) -> list[ServerGroup]:
    """The server groups the caller may see: affinity groups first (by cluster and name),
    then their reservations' groups."""
    groups = [_affinity_server_group(g) for g in _visible_affinity_groups(user)]
    return groups + [_reservation_server_group(r) for r in _reservations_with_groups(user)]


def find_group(user, ref: str) -> ServerGroup | None:
    """The server group whose id is ``ref``, if ``user`` may see it; None otherwise.

    For booting a server into a group (the ``group`` scheduler hint): the result's
    ``affinity_group`` (a ``scheduling.models.AffinityGroup``, seen with
    ``scheduling.view_affinitygroup``) or ``reservation`` (an instance reservation with an
    affinity rule of one of the user's active leases) is the Corral object behind it, exactly
    one of them set; ``policy`` is Nova's (``affinity``, ``anti-affinity``, ``soft-affinity``,
    ``soft-anti-affinity``), ``members`` the member VMs' UUIDs, and ``may_add_members`` whether
    the user may put a VM into it (``scheduling.change_affinitygroup`` on the affinity group;
    always for the owner's reservation group). Put a new server in with
    ``services.add_member()``.
    """
    text = str(ref or "").strip().lower()
    key = affinity_group_key(text)
    if key is not None:
        group = _visible_affinity_groups(user).filter(pk=key).first()
        if group is None:
            return None
        found = _affinity_server_group(group)
        found.may_add_members = made_by(user, group) or holds(user, CHANGE_GROUP, group)
        return found
    for reservation in _reservations_with_groups(user):
        if reservation_group_id(reservation) == text:
            return _reservation_server_group(reservation)
    return None


def zones_of(user):
    """The clusters ``user`` may use as availability zones, by name, each annotated
    ``available`` (one of its hosts is Up); one query."""
    clusters = Cluster.objects.all()
    seen = restrict(clusters, user, "hosts.view_cluster").values("pk")
    creating = restrict(clusters, user, "hosts.add_virtualmachine").values("pk")
    pooled = restrict(VmPool.objects.all(), user, "pools.allocate_vmpool").values("cluster_id")
    reserved = Allocation.objects.filter(reservation__in=reservations_of(user)).values(
        "host__cluster_id"
    )
    up = Host.objects.filter(cluster=OuterRef("pk"), status=HostStatus.UP)
    return (
        clusters.filter(Q(pk__in=seen) | Q(pk__in=creating) | Q(pk__in=pooled) | Q(pk__in=reserved))
        .annotate(available=Exists(up))
        .order_by("name")
    )


def hosts_of(user):
    return with_usage(restrict(Host.objects.all(), user, "hosts.view_host")).order_by("pk")


def any_reservation_flavor(flavor_id: str) -> Flavor | None:
    """An active instance reservation's flavor, whoever owns it (for admins)."""
    if not flavor_id.isdigit() or len(flavor_id) >= 19:
        return None
    found = active_instance_reservations().filter(pk=int(flavor_id)).first()
    return reservation_flavor(found) if found is not None else None
