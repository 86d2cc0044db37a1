"""What Nova's API reads of Corral's rows: the VMs a caller sees as servers, each one's start
history (one query over their jobs), the server row that speaks for a VM, and the server groups
a caller sees or names (affinity groups, and the groups of instance reservations)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q

from hosts.models import Job, JobKind, JobState, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES
from leases.models import Reservation
from openstack.compute.flavors import reservations_of
from openstack.compute.group_ids import affinity_group_id, affinity_group_key, reservation_group_id
from openstack.models import Server
from project.permissions import grant_condition, holds, restrict
from scheduling.models import AffinityGroup, AffinityRule

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
    deletion is queued."""

    started: bool = False
    last_state: str = ""
    last_error: str = ""
    last_finished_at: object = None
    deleting: bool = False


def start_histories(vm_ids: list[int]) -> dict[int, StartHistory]:
    """The start history of each VM, in one query."""
    histories = {vm_id: StartHistory() for vm_id in vm_ids}
    if not vm_ids:
        return histories
    rows = (
        Job.objects.filter(vm_id__in=vm_ids, kind__in=[JobKind.START, JobKind.DELETE])
        .order_by("id")
        .values_list("vm_id", "kind", "state", "error_message", "finished_at")
    )
    for vm_id, kind, state, error, finished_at in rows:
        history = histories[vm_id]
        if kind == JobKind.DELETE:
            history.deleting = history.deleting or state in ACTIVE_JOB_STATES
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
