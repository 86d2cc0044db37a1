"""Server groups (``os-server-groups``): Corral's affinity groups, and the group each instance
reservation with an affinity rule stands for.

An affinity group's VM rule is its policy: positive and enforcing is ``affinity``, negative
and enforcing ``anti-affinity``, not enforcing ``soft-affinity`` / ``soft-anti-affinity``
(2.15); its members are its VMs. A reservation's group has the policy of its rule and the
reservation's VMs as members; its owner sees it while the lease is active, and it ends with
the reservation (it cannot be deleted on its own). Groups made here land in the first cluster
(by name) where the caller may create servers (where a server booted without a zone goes),
else where they may add affinity groups, under a valid name unique there; the name given to
Nova and the user who made it are kept beside it (``openstack.models.NovaServerGroup``).

As Nova's default policy lets a project's members create server groups and show, use and
delete their own, whoever may create servers may make groups, and the user who made a group
sees it, boots servers into it and deletes it whatever their grants; others need the affinity
group's own actions (``scheduling.view_affinitygroup`` …) and see nothing otherwise (a 404).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import Q
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from hosts.models import Cluster
from leases.models import Reservation
from openstack.compute.base import Conflict, NovaView, missing, policy_refused
from openstack.compute.flavors import reservations_of
from openstack.compute.group_ids import affinity_group_id, affinity_group_key, reservation_group_id
from openstack.models import NovaServerGroup
from project.names import validate_object_name
from project.permissions import grant_condition, holds, restrict
from scheduling.models import AffinityGroup, AffinityRule

VIEW = "scheduling.view_affinitygroup"
ADD = "scheduling.add_affinitygroup"
CHANGE = "scheduling.change_affinitygroup"
DELETE = "scheduling.delete_affinitygroup"
CREATE_SERVER = "hosts.add_virtualmachine"
POLICIES = {
    (AffinityRule.POSITIVE, True): "affinity",
    (AffinityRule.NEGATIVE, True): "anti-affinity",
    (AffinityRule.POSITIVE, False): "soft-affinity",
    (AffinityRule.NEGATIVE, False): "soft-anti-affinity",
}
RULES = {policy: rule for rule, policy in POLICIES.items()}


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
        groups = groups.filter(grant_condition(AffinityGroup, user, VIEW) | own)
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
    always for the owner's reservation group). Put a new server in with ``add_member()``.
    """
    text = str(ref or "").strip().lower()
    key = affinity_group_key(text)
    if key is not None:
        group = _visible_affinity_groups(user).filter(pk=key).first()
        if group is None:
            return None
        found = _affinity_server_group(group)
        found.may_add_members = made_by(user, group) or holds(user, CHANGE, group)
        return found
    for reservation in _reservations_with_groups(user):
        if reservation_group_id(reservation) == text:
            return _reservation_server_group(reservation)
    return None


def add_member(group: ServerGroup, vm) -> None:
    """Put ``vm`` into ``group``: into its affinity group (a VM of the group's cluster only);
    for a reservation's group nothing, as launching into the reservation is the membership.
    Refused (403) unless ``group.may_add_members``."""
    if not group.may_add_members:
        raise PermissionDenied(f"You may not add servers to server group {group.id}.")
    affinity_group = group.affinity_group
    if affinity_group is None:
        return
    if vm.cluster_id != affinity_group.cluster_id:
        raise Conflict(
            f"Server group {group.id} keeps servers of cluster {affinity_group.cluster.name}; "
            f"{vm.name} is not in it."
        )
    affinity_group.vms.add(vm)
    group.members.append(str(vm.uuid))


def server_group_view(view: NovaView, group: ServerGroup) -> dict:
    body = {
        "id": group.id,
        "name": group.name,
        "policies": [group.policy],
        "members": group.members,
        "metadata": {},
    }
    if view.at_least(2, 13):
        body |= {"project_id": group.project_id, "user_id": group.user_id}
    return body


def checked_group_name(value) -> str:
    """Nova's rule for a server group's name: 1 to 255 printable characters, no space at
    either end."""
    if not isinstance(value, str) or not 1 <= len(value) <= 255:
        raise ValidationError({"name": "A server group's name is 1 to 255 characters."})
    if value != value.strip() or not value.isprintable():
        raise ValidationError(
            {"name": "A server group's name is printable, with no space at either end."}
        )
    return value


def checked_policy(view: NovaView, value) -> str:
    allowed = ["anti-affinity", "affinity"]
    if view.at_least(2, 15):
        allowed += ["soft-anti-affinity", "soft-affinity"]
    if not isinstance(value, list) or len(value) != 1 or value[0] not in allowed:
        raise ValidationError(
            {"policies": f"Give one policy in a list, one of: {', '.join(allowed)}."}
        )
    return value[0]


def corral_name(name: str, cluster: Cluster, taken: set[str]) -> str:
    """A valid affinity group name derived from Nova's ``name``, unused in the cluster."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip("._-")[:56].rstrip("._-")
    base = base or "server-group"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    validate_object_name(candidate)
    return candidate


def target_cluster(user) -> Cluster:
    """The first cluster (by name) where the user may create servers, the one a server booted
    without an availability zone lands in (a group is for booting servers into, and they boot
    in its cluster); else the first where they may add affinity groups; 403 when neither."""
    clusters = Cluster.objects.order_by("name")
    cluster = restrict(clusters, user, CREATE_SERVER).first()
    if cluster is not None:
        return cluster
    for cluster in restrict(clusters, user, ADD):
        if holds(user, ADD, AffinityGroup(cluster=cluster)):
            return cluster
    raise policy_refused("os_compute_api:os-server-groups:create")


def create_group(user, name: str, policy: str) -> AffinityGroup:
    """An affinity group for a Nova server group, in the cluster ``target_cluster`` picks."""
    cluster = target_cluster(user)
    rule, enforcing = RULES[policy]
    for _attempt in range(5):
        taken = set(AffinityGroup.objects.filter(cluster=cluster).values_list("name", flat=True))
        group = AffinityGroup(
            cluster=cluster,
            name=corral_name(name, cluster, taken),
            description=f"Made through Nova's API as server group {name!r}.",
            vm_rule=rule,
            vm_enforcing=enforcing,
        )
        try:
            with transaction.atomic():
                group.full_clean(validate_unique=False)
                group.save()
                NovaServerGroup.objects.create(affinity_group=group, name=name, user=user)
                return group
        except IntegrityError:
            continue  # the name was taken at the same moment: derive another
    raise Conflict("Could not find a free name for the server group; try again.")


class ServerGroupsView(NovaView):
    def get(self, request):
        groups = visible_groups(request.user)
        offset = _whole(request, "offset")
        limit = _whole(request, "limit")
        groups = groups[offset or 0 :]
        if limit is not None:
            groups = groups[:limit]
        return Response({"server_groups": [server_group_view(self, g) for g in groups]})

    def post(self, request):
        given = self.body("server_group")
        name = checked_group_name(given.get("name"))
        policy = checked_policy(self, given.get("policies"))
        unknown = sorted(set(given) - {"name", "policies"})
        if unknown:
            raise ValidationError({unknown[0]: "Additional properties are not allowed."})
        group = create_group(request.user, name, policy)
        found = find_group(request.user, affinity_group_id(group))
        return Response({"server_group": server_group_view(self, found)})


def _whole(request, name: str) -> int | None:
    given = request.query_params.get(name)
    if given is None:
        return None
    if not given.isdigit():
        raise ValidationError({name: f"Invalid value {given!r}: a whole number is needed."})
    return int(given)


class ServerGroupView(NovaView):
    def get(self, request, group_id: str):
        return Response({"server_group": server_group_view(self, self.group(group_id))})

    def delete(self, request, group_id: str):
        group = self.group(group_id)
        if group.reservation is not None:
            raise Conflict(
                f"Server group {group.id} is reservation {group.reservation.pk}'s: it ends "
                "with its lease and cannot be deleted on its own."
            )
        affinity_group = group.affinity_group
        if not (
            made_by(request.user, affinity_group) or holds(request.user, DELETE, affinity_group)
        ):
            raise policy_refused("os_compute_api:os-server-groups:delete")
        affinity_group.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)

    def group(self, group_id: str) -> ServerGroup:
        found = find_group(self.request.user, group_id)
        if found is None:
            raise missing(f"Instance group {group_id} could not be found.")
        return found
