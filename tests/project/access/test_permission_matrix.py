"""The permission test matrix: every object type, every action, tried by every kind of caller.

Each row of ``ROWS`` is one object type of the API. For each of its actions the matrix tries:

- a caller holding no grant: the object does not exist for them (hidden from lists, 404);
- a caller holding a role that allows the action, granted on the object or on a scope around
  it (``routes``), directly or through a group: the action succeeds;
- a caller holding the same role on another object of the same scope: hidden again;
- a caller who may see the object but not act on it (``viewers``): 403, nothing changes.

Creating needs the add action on the parent scope (``creators``); seeing the parent without it
is a 403 (``refused_creators``); a parent the caller cannot see is a 400 on the parent field.

To cover a new object type, add a ``Row`` (and, if it needs one, an object to ``Place``). A route
of the API that no row tries must be listed, with where its permissions are proven, in
test_matrix_coverage.py: a new route on neither fails there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Model
from django.utils import timezone

from hosts.models import Cluster, Host, Image, Template, VirtualMachine
from leases.models import Lease
from pools.models import VmPool
from project.access.tokens import issue as issue_token
from scheduling.models import AffinityGroup, Policy, PolicyUnit
from tests.conftest import unique
from tests.project.access.conftest import STRONG_PASSWORD, Place, listed_ids
from tests.project.api.routes import api_routes

User = get_user_model()

AUDITOR_ACTIONS = [
    "hosts.view_cluster",
    "hosts.view_host",
    "hosts.view_template",
    "hosts.view_image",
    "hosts.view_virtualmachine",
    "auth.view_user",
    "auth.view_group",
    "leases.view_lease",
    "scheduling.view_affinitygroup",
]
# Sees pools and their VMs, and may take or give back none of them.
POOL_VIEWER_ACTIONS = ["pools.view_vmpool", "hosts.view_virtualmachine"]


@dataclass(frozen=True)
class Route:
    """A role granted at a scope: ``system``, or an object of a ``Place`` (cluster, pool, vm)."""

    role: str
    scope: str

    def __str__(self) -> str:
        return f"{self.role}@{self.scope}"

    def on(self, place: Place):
        return place.scope(self.scope)

    def elsewhere(self, away: Place):
        """The same scope type in another place; a system grant's counterpart is a cluster."""
        return away.scope("cluster" if self.scope == "system" else self.scope)


AUDITOR = Route("Auditor", "system")


def _fresh(obj: Model) -> Model | None:
    return type(obj).objects.filter(pk=obj.pk).first()


@dataclass(frozen=True)
class Action:
    """One thing a caller tries on an object, and how to tell that it happened."""

    name: str
    method: str
    detail: bool = True
    suffix: str = ""
    success: int = 200
    prepare: Callable[[Model], None] = lambda obj: None
    happened: Callable[[Row, Model], bool] | None = None


def _changed(row: Row, obj: Model) -> bool:
    name, value = row.change
    return getattr(_fresh(obj), name) == value


def _deleted(row: Row, obj: Model) -> bool:
    return _fresh(obj) is None


def _deactivate_first(user) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


def _put_an_up_vm_in(pool: VmPool) -> None:
    """A running VM no one holds, so that taking one from the pool needs no job."""
    VirtualMachine.objects.filter(pool=pool).update(owner=None, status="up")
    if not VirtualMachine.objects.filter(pool=pool).exists():
        template = pool.template
        VirtualMachine.objects.create(
            name=unique("vm"),
            cluster=pool.cluster,
            template=template,
            pool=pool,
            status="up",
            vcpus=template.vcpus,
            memory_mb=template.memory_mb,
            disk_gb=template.disk_gb,
        )


def _give_to_someone(vm: VirtualMachine) -> None:
    """The VM is held by another user, so giving it back shows."""
    vm.owner = User.objects.create_user(unique("holder"), password=STRONG_PASSWORD)
    vm.save(update_fields=["owner"])


ACTIONS = {
    action.name: action
    for action in (
        Action("list", "get", detail=False),
        Action("retrieve", "get"),
        Action("update", "patch", happened=_changed),
        Action("delete", "delete", success=204, happened=_deleted),
        Action(
            "deactivate",
            "post",
            suffix="deactivate/",
            happened=lambda row, obj: not _fresh(obj).is_active,
        ),
        Action(
            "activate",
            "post",
            suffix="activate/",
            prepare=_deactivate_first,
            happened=lambda row, obj: _fresh(obj).is_active,
        ),
        Action(
            "allocatevm",
            "post",
            suffix="allocatevm/",
            prepare=_put_an_up_vm_in,
            happened=lambda row, obj: VirtualMachine.objects.filter(
                pool=obj, owner__isnull=False
            ).exists(),
        ),
        Action(
            "return",
            "post",
            suffix="return/",
            success=202,
            prepare=_give_to_someone,
            happened=lambda row, obj: _fresh(obj).owner_id is None,
        ),
    )
}
READS = ("list", "retrieve")


@dataclass(frozen=True)
class Row:
    """One object type exposed by the API."""

    endpoint: str
    model: type[Model]
    target: Callable[[Place], Model]
    change: tuple[str, Any]
    routes: tuple[Route, ...]
    viewers: tuple[Route, ...]
    # None: a row for actions on existing objects only; its endpoint's creating is elsewhere.
    new: Callable[[Place], dict] | None
    creators: tuple[Route, ...]
    refused_creators: tuple[Route, ...]
    parent: str | None = None
    actions: tuple[str, ...] = ("list", "retrieve", "update", "delete")
    in_cluster: bool = True
    # Grants around the object that do not reach it (the object stays hidden).
    blind: tuple[Route, ...] = ()
    # Names the row in test ids when an endpoint has more than one row.
    label: str = ""

    def __str__(self) -> str:
        return self.label or self.endpoint

    def url(self, obj: Model | None = None, suffix: str = "") -> str:
        if obj is None:
            return f"/api/{self.endpoint}/"
        return f"/api/{self.endpoint}/{obj.pk}/{suffix}"


def _affinity_group(place: Place) -> AffinityGroup:
    """The place's affinity group, made on first use (like the place's other objects)."""
    if "affinity_group" not in place.__dict__:
        place.__dict__["affinity_group"] = AffinityGroup.objects.create(
            cluster=place.cluster, name=unique("affinity")
        )
    return place.__dict__["affinity_group"]


def _new_lease(place: Place) -> dict:
    """A lease body that fits: one instance on a reservable host added to the place."""
    name = unique("reservable")
    Host.objects.create(
        cluster=place.cluster,
        name=name,
        uri=f"qemu+ssh://root@{name}.example.org/system",
        status="up",
        cpus=16,
        memory_mb=3072,
        reservable=True,
    )
    return {
        "name": unique("new-lease"),
        "start": "now",
        "end": (timezone.now() + timedelta(hours=1)).isoformat(),
        "reservations": [
            {"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 128, "amount": 1}
        ],
    }


ROWS = [
    Row(
        endpoint="clusters",
        model=Cluster,
        target=lambda place: place.cluster,
        change=("description", "Changed by the matrix."),
        routes=(
            Route("ClusterAdmin", "cluster"),
            Route("ClusterAdmin", "system"),
            Route("SuperUser", "system"),
        ),
        viewers=(Route("PowerUser", "cluster"), AUDITOR),
        new=lambda place: {"name": unique("new-cluster")},
        creators=(Route("ClusterAdmin", "system"), Route("SuperUser", "system")),
        refused_creators=(Route("ClusterAdmin", "cluster"), AUDITOR),
    ),
    Row(
        endpoint="hosts",
        model=Host,
        target=lambda place: place.host,
        change=("description", "Changed by the matrix."),
        routes=(Route("ClusterAdmin", "cluster"), Route("SuperUser", "system")),
        viewers=(Route("PolicyAdmin", "cluster"), AUDITOR),
        new=lambda place: {
            "name": (name := unique("new-host")),
            "cluster": place.cluster.pk,
            "uri": f"qemu+ssh://root@{name}.example.org/system",
        },
        parent="cluster",
        creators=(Route("ClusterAdmin", "cluster"), Route("SuperUser", "system")),
        refused_creators=(Route("PolicyAdmin", "cluster"), AUDITOR),
    ),
    Row(
        endpoint="templates",
        model=Template,
        target=lambda place: place.template,
        change=("description", "Changed by the matrix."),
        routes=(Route("ClusterAdmin", "cluster"), Route("SuperUser", "system")),
        viewers=(Route("PowerUser", "cluster"), AUDITOR),
        new=lambda place: {"name": unique("new-tmpl"), "cluster": place.cluster.pk},
        parent="cluster",
        # Who may create VMs in the cluster makes templates of their own there
        # (tests/hosts/test_user_templates.py says what they may do with them).
        creators=(
            Route("ClusterAdmin", "cluster"),
            Route("PowerUser", "cluster"),
            Route("SuperUser", "system"),
        ),
        refused_creators=(AUDITOR,),
    ),
    Row(
        endpoint="images",
        model=Image,
        target=lambda place: place.image,
        change=("description", "Changed by the matrix."),
        routes=(Route("ClusterAdmin", "cluster"), Route("SuperUser", "system")),
        viewers=(Route("PowerUser", "cluster"), AUDITOR),
        # Images are created by a multipart upload: tests/hosts/images/test_images_access.py.
        new=None,
        creators=(),
        refused_creators=(),
    ),
    Row(
        endpoint="vms",
        model=VirtualMachine,
        target=lambda place: place.vm,
        change=("description", "Changed by the matrix."),
        routes=(
            Route("UserVmManager", "vm"),
            Route("UserVmManager", "cluster"),
            Route("PoolAdmin", "pool"),
            Route("ClusterAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        viewers=(Route("UserRole", "vm"), AUDITOR),
        # Pool users take VMs from the pool; they do not reach the VMs others took.
        blind=(Route("UserRole", "pool"),),
        new=lambda place: {
            "name": unique("new-vm"),
            "cluster": place.cluster.pk,
            "template": place.template.pk,
        },
        parent="cluster",
        creators=(
            Route("PowerUser", "cluster"),
            Route("ClusterAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        refused_creators=(AUDITOR,),
    ),
    Row(
        endpoint="vms",
        label="vms-admin-hold",
        model=VirtualMachine,
        target=lambda place: place.vm,
        # Holding a pool's VM for the admins is changing the VM.
        change=("admin_hold", True),
        routes=(
            Route("UserVmManager", "vm"),
            Route("PoolAdmin", "pool"),
            Route("ClusterAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        viewers=(Route("UserRole", "vm"), AUDITOR),
        blind=(Route("UserRole", "pool"),),
        new=None,
        creators=(),
        refused_creators=(),
        actions=("update",),
    ),
    Row(
        endpoint="vmpools",
        model=VmPool,
        target=lambda place: place.pool,
        change=("description", "Changed by the matrix."),
        routes=(
            Route("PoolAdmin", "pool"),
            Route("PoolAdmin", "cluster"),
            Route("ClusterAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        viewers=(Route("UserRole", "pool"),),
        new=lambda place: {
            "name": unique("new-pool"),
            "cluster": place.cluster.pk,
            "template": place.template.pk,
            "size": 1,
        },
        parent="cluster",
        creators=(
            Route("ClusterAdmin", "cluster"),
            Route("PoolAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        refused_creators=(Route("PowerUser", "cluster"),),
    ),
    Row(
        endpoint="vmpools",
        label="vmpools-allocatevm",
        model=VmPool,
        target=lambda place: place.pool,
        change=("description", ""),
        routes=(
            Route("UserRole", "pool"),
            Route("PoolAdmin", "pool"),
            Route("PoolAdmin", "cluster"),
            Route("ClusterAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        viewers=(Route("PoolViewer", "pool"),),
        new=None,
        creators=(),
        refused_creators=(),
        actions=("allocatevm",),
    ),
    Row(
        endpoint="vms",
        label="vms-return",
        model=VirtualMachine,
        target=lambda place: place.vm,
        change=("description", ""),
        routes=(
            Route("PoolAdmin", "pool"),
            Route("PoolAdmin", "cluster"),
            Route("ClusterAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        # They see (and use) the VM, but it is not theirs to give back to its pool.
        viewers=(Route("UserVmManager", "vm"), Route("UserRole", "vm")),
        new=None,
        creators=(),
        refused_creators=(),
        actions=("return",),
    ),
    Row(
        endpoint="affinitygroups",
        model=AffinityGroup,
        target=_affinity_group,
        change=("description", "Changed by the matrix."),
        routes=(
            Route("ClusterAdmin", "cluster"),
            Route("PolicyAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        viewers=(AUDITOR,),
        new=lambda place: {"name": unique("new-affinity"), "cluster": place.cluster.pk},
        parent="cluster",
        creators=(
            Route("ClusterAdmin", "cluster"),
            Route("PolicyAdmin", "cluster"),
            Route("SuperUser", "system"),
        ),
        refused_creators=(Route("PowerUser", "cluster"), AUDITOR),
    ),
    Row(
        endpoint="leases",
        model=Lease,
        target=lambda place: place.lease,
        change=("name", "Changed by the matrix"),
        routes=(Route("LeaseOwner", "lease"), Route("SuperUser", "system")),
        viewers=(AUDITOR,),
        new=_new_lease,
        creators=(Route("LeaseUser", "system"), Route("SuperUser", "system")),
        refused_creators=(AUDITOR, Route("LeaseOwner", "lease")),
        # Leases are in no cluster: a grant's counterpart elsewhere is another lease.
        in_cluster=False,
    ),
    Row(
        endpoint="users",
        model=User,
        target=lambda place: place.user,
        change=("first_name", "Changed"),
        routes=(Route("SuperUser", "system"),),
        viewers=(AUDITOR,),
        new=lambda place: {"username": unique("new-user"), "password": STRONG_PASSWORD},
        creators=(Route("SuperUser", "system"),),
        refused_creators=(AUDITOR, Route("SuperUser", "cluster")),
        actions=("list", "retrieve", "update", "deactivate", "activate"),
        in_cluster=False,
    ),
    Row(
        endpoint="groups",
        model=Group,
        target=lambda place: place.group,
        change=("name", "renamed-by-the-matrix"),
        routes=(Route("SuperUser", "system"),),
        viewers=(AUDITOR,),
        new=lambda place: {"name": unique("new-group")},
        creators=(Route("SuperUser", "system"),),
        refused_creators=(AUDITOR, Route("SuperUser", "cluster")),
        in_cluster=False,
    ),
]

VIAS = ("user", "group")


def _cases(routes_of: Callable[[Row], tuple[Route, ...]], actions_of=None, vias=VIAS):
    for row in ROWS:
        for route in routes_of(row):
            for action in actions_of(row) if actions_of else row.actions:
                for via in vias:
                    yield pytest.param(row, route, action, via, id=f"{row}-{route}-{action}-{via}")


@pytest.fixture(autouse=True)
def auditor_role(make_role):
    """A custom role that may look at everything and change nothing."""
    return make_role("Auditor", AUDITOR_ACTIONS)


@pytest.fixture(autouse=True)
def pool_viewer_role(make_role):
    return make_role("PoolViewer", POOL_VIEWER_ACTIONS)


def attempt(client, row: Row, action_name: str, target: Model):
    action = ACTIONS[action_name]
    action.prepare(target)
    if not action.detail:
        return client.get(row.url(), {"limit": 1000})
    body = dict([row.change]) if action_name == "update" else None
    return getattr(client, action.method)(row.url(target, action.suffix), body)


def assert_done(row: Row, action_name: str, target: Model, response) -> None:
    action = ACTIONS[action_name]
    assert response.status_code == action.success, response.content
    if action_name == "list":
        assert target.pk in listed_ids(response)
    elif action_name == "retrieve":
        assert response.json()["id"] == target.pk
    else:
        assert action.happened(row, target)


def assert_hidden(row: Row, action_name: str, target: Model, response) -> None:
    if action_name == "list":
        assert target.pk not in listed_ids(response)
        return
    assert response.status_code == 404, response.content
    happened = ACTIONS[action_name].happened
    assert happened is None or not happened(row, target)


# Reading and acting on existing objects.


@pytest.mark.parametrize(
    "row, action_name",
    [pytest.param(row, a, id=f"{row}-{a}") for row in ROWS for a in row.actions],
)
def test_caller_without_grant_cannot_find_the_object(row, action_name, home, caller, client_for):
    target = row.target(home)
    user = caller()

    response = attempt(client_for(user), row, action_name, target)

    assert_hidden(row, action_name, target, response)


@pytest.mark.parametrize("row, route, action_name, via", list(_cases(lambda row: row.blind)))
def test_grant_around_the_object_that_does_not_reach_it_keeps_it_hidden(
    row, route, action_name, via, home, caller, client_for
):
    target = row.target(home)
    user = caller(route.role, route.on(home), via=via)

    response = attempt(client_for(user), row, action_name, target)

    assert_hidden(row, action_name, target, response)


@pytest.mark.parametrize("row, route, action_name, via", list(_cases(lambda row: row.routes)))
def test_role_granted_on_the_object_or_around_it_allows_the_action(
    row, route, action_name, via, home, caller, client_for
):
    target = row.target(home)
    user = caller(route.role, route.on(home), via=via)

    response = attempt(client_for(user), row, action_name, target)

    assert_done(row, action_name, target, response)


@pytest.mark.parametrize("row, route, action_name, via", list(_cases(lambda row: row.routes)))
def test_same_role_granted_elsewhere_hides_the_object(
    row, route, action_name, via, home, away, caller, client_for
):
    target = row.target(home)
    user = caller(route.role, route.elsewhere(away), via=via)

    response = attempt(client_for(user), row, action_name, target)

    assert_hidden(row, action_name, target, response)


@pytest.mark.parametrize(
    "row, route",
    [pytest.param(row, r, id=f"{row}-{r}") for row in ROWS if row.in_cluster for r in row.routes],
)
def test_role_granted_elsewhere_lists_only_the_objects_there(
    row, route, home, away, caller, client_for
):
    target, other = row.target(home), row.target(away)
    user = caller(route.role, route.elsewhere(away))

    shown = listed_ids(client_for(user).get(row.url(), {"limit": 1000}))

    assert other.pk in shown
    assert target.pk not in shown


@pytest.mark.parametrize(
    "row, route, action_name, via", list(_cases(lambda row: row.viewers, lambda row: READS))
)
def test_viewer_role_shows_the_object(row, route, action_name, via, home, caller, client_for):
    target = row.target(home)
    user = caller(route.role, route.on(home), via=via)

    response = attempt(client_for(user), row, action_name, target)

    assert_done(row, action_name, target, response)


def _writes(row: Row) -> tuple[str, ...]:
    return tuple(a for a in row.actions if a not in READS)


@pytest.mark.parametrize(
    "row, route, action_name, via", list(_cases(lambda row: row.viewers, _writes, ("user",)))
)
def test_viewer_role_may_not_act_on_the_object(
    row, route, action_name, via, home, caller, client_for
):
    target = row.target(home)
    user = caller(route.role, route.on(home), via=via)

    response = attempt(client_for(user), row, action_name, target)

    assert response.status_code == 403, response.content
    assert not ACTIONS[action_name].happened(row, target)


@pytest.mark.parametrize(
    "row, action_name",
    [pytest.param(row, a, id=f"{row}-{a}") for row in ROWS for a in READS],
)
def test_inactive_user_sees_nothing_despite_a_grant(row, action_name, home, caller, client_for):
    target = row.target(home)
    user = caller(row.routes[0].role, row.routes[0].on(home))
    _deactivate_first(user)

    response = attempt(client_for(user), row, action_name, target)

    assert_hidden(row, action_name, target, response)


# Creating.


def _create(row: Row, client, place: Place):
    before = row.model.objects.count()
    response = client.post(row.url(), row.new(place))
    return response, row.model.objects.count() - before


@pytest.mark.parametrize(
    "row, route, via",
    [
        pytest.param(row, r, v, id=f"{row}-{r}-{v}")
        for row in ROWS
        for r in row.creators
        for v in VIAS
    ],
)
def test_add_action_on_the_parent_scope_allows_create(row, route, via, home, caller, client_for):
    user = caller(route.role, route.on(home), via=via)

    response, added = _create(row, client_for(user), home)

    assert response.status_code == 201, response.content
    assert added == 1


@pytest.mark.parametrize(
    "row, route",
    [pytest.param(row, r, id=f"{row}-{r}") for row in ROWS for r in row.refused_creators],
)
def test_seeing_the_parent_without_the_add_action_refuses_create(
    row, route, home, caller, client_for
):
    user = caller(route.role, route.on(home))

    response, added = _create(row, client_for(user), home)

    assert response.status_code == 403, response.content
    assert added == 0


@pytest.mark.parametrize(
    "row, route",
    [pytest.param(row, row.creators[0], id=str(row)) for row in ROWS if row.parent and row.new],
)
def test_parent_the_caller_cannot_see_is_a_field_error(row, route, home, away, caller, client_for):
    user = caller(route.role, route.elsewhere(away))

    response, added = _create(row, client_for(user), home)

    assert response.status_code == 400, response.content
    assert "does not exist" in " ".join(response.json()[row.parent])
    assert added == 0


@pytest.mark.parametrize("row", [pytest.param(row, id=str(row)) for row in ROWS if row.new])
def test_caller_without_grant_cannot_create(row, home, caller, client_for):
    user = caller()

    response, added = _create(row, client_for(user), home)

    assert response.status_code == (400 if row.parent else 403), response.content
    assert added == 0


# Scheduling policies do not fit the rows: a policy belongs to no cluster and every signed-in
# caller may read it, so nothing is hidden. Changing it needs PolicyAdmin on every cluster that
# uses it (or somewhere, while none does); the same cases are tried here against that rule.


@pytest.fixture
def used_policy(home):
    """An unlocked policy that the home cluster uses."""
    policy = Policy.objects.create(name=unique("policy"))
    home.cluster.policy = policy
    home.cluster.save(update_fields=["policy"])
    return policy


POLICY_CHANGERS = (
    Route("PolicyAdmin", "cluster"),
    Route("PolicyAdmin", "system"),
    Route("SuperUser", "system"),
)
# Without PolicyAdmin where the policy is used: a viewer-only role, and the right role elsewhere.
POLICY_REFUSED = (None, Route("ClusterAdmin", "cluster"), AUDITOR)


def _policy_caller(caller, route: Route | None, place: Place, via: str = "user"):
    return caller() if route is None else caller(route.role, route.on(place), via=via)


@pytest.mark.parametrize("route", [pytest.param(r, id=str(r)) for r in (None, *POLICY_CHANGERS)])
def test_every_signed_in_caller_reads_the_policies(route, used_policy, home, caller, client_for):
    client = client_for(_policy_caller(caller, route, home))

    listed = listed_ids(client.get("/api/schedulingpolicies/", {"limit": 1000}))
    retrieved = client.get(f"/api/schedulingpolicies/{used_policy.pk}/")

    assert used_policy.pk in listed
    assert retrieved.status_code == 200
    assert retrieved.json()["id"] == used_policy.pk


@pytest.mark.parametrize(
    "route, via",
    [pytest.param(r, v, id=f"{r}-{v}") for r in POLICY_CHANGERS for v in VIAS],
)
def test_policy_admin_where_the_policy_is_used_may_change_it(
    route, via, used_policy, home, caller, client_for
):
    client = client_for(_policy_caller(caller, route, home, via))

    response = client.patch(
        f"/api/schedulingpolicies/{used_policy.pk}/", {"description": "Changed by the matrix."}
    )

    assert response.status_code == 200, response.content
    assert _fresh(used_policy).description == "Changed by the matrix."


@pytest.mark.parametrize(
    "route, method",
    [
        pytest.param(r, m, id=f"{r}-{m}")
        for r in (*POLICY_REFUSED, Route("PolicyAdmin", "cluster@away"))
        for m in ("patch", "delete")
    ],
)
def test_caller_without_policy_admin_where_it_is_used_may_not_change_it(
    route, method, used_policy, home, away, caller, client_for
):
    if route is not None and route.scope == "cluster@away":
        user = caller(route.role, away.cluster)
    else:
        user = _policy_caller(caller, route, home)

    response = getattr(client_for(user), method)(
        f"/api/schedulingpolicies/{used_policy.pk}/", {"description": "Changed by the matrix."}
    )

    assert response.status_code == 403, response.content
    assert _fresh(used_policy) is not None
    assert _fresh(used_policy).description == ""


# Policy units belong to no cluster either, and every policy of every cluster may use one:
# everyone signed in reads them, and only a system-wide PolicyAdmin (or SuperUser) enables,
# disables or changes what a failing filter does.

UNIT_CHANGERS = (Route("PolicyAdmin", "system"), Route("SuperUser", "system"))
UNIT_REFUSED = (
    None,
    Route("PolicyAdmin", "cluster"),
    Route("ClusterAdmin", "cluster"),
    Route("ClusterAdmin", "system"),
    AUDITOR,
)


@pytest.fixture
def memory_unit():
    return PolicyUnit.objects.get(name="Memory")


@pytest.mark.parametrize("route", [pytest.param(r, id=str(r)) for r in (None, *UNIT_CHANGERS)])
def test_every_signed_in_caller_reads_the_policy_units(
    route, memory_unit, home, caller, client_for
):
    client = client_for(_policy_caller(caller, route, home))

    listed = listed_ids(client.get("/api/schedulingpolicyunits/", {"limit": 1000}))
    retrieved = client.get(f"/api/schedulingpolicyunits/{memory_unit.pk}/")

    assert memory_unit.pk in listed
    assert (retrieved.status_code, retrieved.json()["name"]) == (200, "Memory")


@pytest.mark.parametrize(
    "route, via", [pytest.param(r, v, id=f"{r}-{v}") for r in UNIT_CHANGERS for v in VIAS]
)
def test_a_system_wide_policy_admin_may_disable_a_unit(
    route, via, memory_unit, home, caller, client_for
):
    client = client_for(_policy_caller(caller, route, home, via))

    response = client.patch(
        f"/api/schedulingpolicyunits/{memory_unit.pk}/", {"enabled": False}, format="json"
    )

    assert response.status_code == 200, response.content
    assert _fresh(memory_unit).enabled is False


@pytest.mark.parametrize("route", [pytest.param(r, id=str(r)) for r in UNIT_REFUSED])
def test_anyone_else_may_not_change_a_unit(route, memory_unit, home, caller, client_for):
    client = client_for(_policy_caller(caller, route, home))

    response = client.patch(
        f"/api/schedulingpolicyunits/{memory_unit.pk}/",
        {"enabled": False, "on_failure": "drop"},
        format="json",
    )

    assert response.status_code == 403, response.content
    assert (_fresh(memory_unit).enabled, _fresh(memory_unit).on_failure) == (True, "keep")


# Shared templates: a template with no cluster is offered in every cluster.


def test_shared_template_is_visible_to_template_viewers_of_any_cluster(
    home, caller, client_for, make_template
):
    shared = make_template(cluster=None)
    user = caller("PowerUser", home.cluster)

    response = client_for(user).get(f"/api/templates/{shared.pk}/")

    assert response.status_code == 200


def test_shared_template_is_hidden_from_callers_who_see_no_templates(
    home, caller, client_for, make_template
):
    shared = make_template(cluster=None)
    user = caller("UserVmManager", home.cluster)

    response = client_for(user).get(f"/api/templates/{shared.pk}/")

    assert response.status_code == 404


def test_vm_viewer_may_not_operate_it_through_another_role_elsewhere(
    home, away, grant, caller, client_for
):
    user = caller("UserRole", home.vm)
    grant(user, "UserVmManager", away.vm)

    response = client_for(user).patch(f"/api/vms/{home.vm.pk}/", {"description": "Changed."})

    assert response.status_code == 403
    assert _fresh(home.vm).description == ""


# Anonymous callers.

PUBLIC = {
    "auth-token": "logging in is how a caller gets a token",
    "schema": "the OpenAPI description holds no data",
    "api-docs": "the Swagger UI page holds no data",
}


# (name, url, methods) of every route under /api/, as the URL configuration has them.
ENDPOINTS = [(route.name, route.url, route.methods) for route in api_routes()]


@pytest.mark.parametrize(
    "url, method",
    [
        pytest.param(url, method, id=f"{method}-{url}")
        for name, url, methods in ENDPOINTS
        if name not in PUBLIC
        for method in methods
    ],
)
def test_anonymous_caller_is_refused_everywhere(url, method, client_for, db):
    response = getattr(client_for(None), method)(url, {})

    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"] == "Token"


def test_public_endpoint_names_still_exist():
    assert {name for name, _, _ in ENDPOINTS} >= set(PUBLIC)


def test_deactivated_user_token_is_refused(caller, token_client, home):
    user = caller("SuperUser")
    token = issue_token(user)[1]
    _deactivate_first(user)

    response = token_client(token).get("/api/vms/")

    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"] == "Token"
