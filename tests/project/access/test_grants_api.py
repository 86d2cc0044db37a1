"""/api/permissions/: granting roles at each scope, validation, visibility, revoking, escalation."""

import pytest
from django.contrib.auth import get_user_model

from project.access import scopes
from project.access.permissions import holds
from project.models import System
from tests.project.access.conftest import grant_count, listed_ids

User = get_user_model()
URL = "/api/permissions/"


def grant_body(role, obj=None, *, user=None, group=None, object_type=None) -> dict:
    body = {"role": role, "object_type": object_type or "system"}
    if obj is not None:
        body["object_type"] = object_type or scopes.of_model(type(obj))
        body["object_id"] = obj.pk
    if user is not None:
        body["user"] = user.username
    if group is not None:
        body["group"] = group.name
    return body


# Creating grants at each scope.


def test_superuser_grants_a_role_on_the_whole_system(admin_user, make_user, client_for):
    user = make_user()

    response = client_for(admin_user).post(URL, grant_body("PowerUser", user=user))

    assert response.status_code == 201, response.content
    assert response.json() == {
        "id": response.json()["id"],
        "role": "PowerUser",
        "user": user.username,
        "group": None,
        "object_type": "system",
        "object_id": None,
        "object_name": str(System.get()),
    }
    assert holds(user, "hosts.add_virtualmachine", System.get())


@pytest.mark.parametrize(
    "object_type, role, action",
    [
        ("cluster", "ClusterAdmin", "hosts.change_host"),
        ("pool", "PoolAdmin", "pools.allocate_vmpool"),
        ("lease", "LeaseOwner", "leases.change_lease"),
        ("vm", "UserVmManager", "hosts.change_virtualmachine"),
    ],
)
def test_superuser_grants_a_role_on_an_object(
    object_type, role, action, admin_user, make_user, home, make_lease, client_for
):
    user = make_user()
    obj = make_lease() if object_type == "lease" else home.scope(object_type)

    response = client_for(admin_user).post(
        URL, grant_body(role, obj, user=user, object_type=object_type)
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["role"], body["object_type"], body["object_id"]) == (role, object_type, obj.pk)
    assert body["object_name"] == str(obj)
    assert body["id"].startswith("u")
    assert holds(user, action, obj)


def test_grant_to_a_group_gets_a_group_id(admin_user, make_group, home, client_for):
    group = make_group()

    response = client_for(admin_user).post(URL, grant_body("UserRole", home.vm, group=group))

    assert response.status_code == 201, response.content
    assert response.json()["id"].startswith("g")
    assert response.json()["group"] == group.name


def test_repeating_a_grant_answers_200_with_the_same_grant(admin_user, make_user, home, client_for):
    user = make_user()
    client = client_for(admin_user)
    first = client.post(URL, grant_body("UserRole", home.vm, user=user))

    again = client.post(URL, grant_body("UserRole", home.vm, user=user))

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert grant_count() == 1


# Validation: a 400 naming the field, and nothing stored.


def _bad_bodies(user, group, vm):
    base = {"role": "UserRole", "user": user.username, "object_type": "vm", "object_id": vm.pk}
    return {
        "unknown role": ("role", {**base, "role": "NoSuchRole"}),
        "unknown user": ("user", {**base, "user": "nobody-here"}),
        "unknown group": ("group", {**base, "user": None, "group": "no-such-group"}),
        "both user and group": ("user", {**base, "group": group.name}),
        "neither user nor group": ("user", {k: v for k, v in base.items() if k != "user"}),
        "unknown object type": ("object_type", {**base, "object_type": "planet"}),
        "object id missing": ("object_id", {k: v for k, v in base.items() if k != "object_id"}),
        "object id on a system grant": ("object_id", {**base, "object_type": "system"}),
        "object does not exist": ("object_id", {**base, "object_id": vm.pk + 1000}),
        "object id not a number": ("object_id", {**base, "object_id": "first"}),
    }


@pytest.mark.parametrize(
    "case",
    [
        "unknown role",
        "unknown user",
        "unknown group",
        "both user and group",
        "neither user nor group",
        "unknown object type",
        "object id missing",
        "object id on a system grant",
        "object does not exist",
        "object id not a number",
    ],
)
def test_invalid_grant_is_a_field_error_and_stores_nothing(
    case, admin_user, make_user, make_group, home, client_for
):
    field, body = _bad_bodies(make_user(), make_group(), home.vm)[case]

    response = client_for(admin_user).post(URL, body)

    assert response.status_code == 400, response.content
    assert response.json()[field]
    assert grant_count() == 0


def test_grant_on_an_object_the_caller_cannot_see_is_reported_as_missing(
    home, away, caller, make_user, client_for
):
    cluster_admin = caller("ClusterAdmin", away.cluster)

    response = client_for(cluster_admin).post(
        URL, grant_body("UserRole", home.vm, user=make_user())
    )

    assert response.status_code == 400
    assert response.json() == {"object_id": [f"No vm with id {home.vm.pk}."]}
    assert grant_count() == 1


# Who may grant what: no one hands out more than they hold.


def test_cluster_admin_grants_roles_inside_their_cluster(home, caller, make_user, client_for):
    cluster_admin = caller("ClusterAdmin", home.cluster)
    user = make_user()

    response = client_for(cluster_admin).post(URL, grant_body("UserVmManager", home.vm, user=user))

    assert response.status_code == 201, response.content
    assert holds(user, "hosts.change_virtualmachine", home.vm)


def test_cluster_admin_cannot_grant_superuser_on_their_cluster(home, caller, make_user, client_for):
    cluster_admin = caller("ClusterAdmin", home.cluster)
    user = make_user()

    response = client_for(cluster_admin).post(URL, grant_body("SuperUser", home.cluster, user=user))

    assert response.status_code == 403
    assert not holds(user, "auth.change_user", home.cluster)
    assert grant_count() == 1


def test_cluster_admin_cannot_grant_on_the_system(caller, home, make_user, client_for):
    cluster_admin = caller("ClusterAdmin", home.cluster)

    response = client_for(cluster_admin).post(URL, grant_body("UserRole", user=make_user()))

    assert response.status_code == 403
    assert grant_count() == 1


def test_pool_admin_grants_user_role_on_their_pool(home, caller, make_user, client_for):
    pool_admin = caller("PoolAdmin", home.pool)
    user = make_user()

    response = client_for(pool_admin).post(URL, grant_body("UserRole", home.pool, user=user))

    assert response.status_code == 201, response.content
    assert holds(user, "pools.allocate_vmpool", home.pool)


def test_pool_admin_cannot_grant_on_another_pool(home, away, caller, make_user, client_for):
    pool_admin = caller("PoolAdmin", home.pool)
    user = make_user()

    response = client_for(pool_admin).post(URL, grant_body("UserRole", away.pool, user=user))

    assert response.status_code == 400
    assert "object_id" in response.json()
    assert not holds(user, "pools.allocate_vmpool", away.pool)


def test_pool_admin_cannot_grant_on_another_pool_of_the_same_cluster(
    home, caller, make_user, make_pool, client_for
):
    pool_admin = caller("PoolAdmin", home.pool)
    other_pool = make_pool(cluster=home.cluster, template=home.template)
    user = make_user()

    response = client_for(pool_admin).post(URL, grant_body("UserRole", other_pool, user=user))

    assert response.status_code == 400
    assert not holds(user, "pools.allocate_vmpool", other_pool)


def test_pool_admin_cannot_grant_cluster_admin_on_their_pool(home, caller, make_user, client_for):
    pool_admin = caller("PoolAdmin", home.pool)
    user = make_user()

    response = client_for(pool_admin).post(URL, grant_body("ClusterAdmin", home.pool, user=user))

    assert response.status_code == 403
    assert not holds(user, "hosts.add_host", home.cluster)


def test_user_who_sees_an_object_but_may_not_manage_grants_gets_403(
    home, caller, make_user, client_for
):
    vm_user = caller("UserRole", home.vm)

    response = client_for(vm_user).post(URL, grant_body("UserRole", home.vm, user=make_user()))

    assert response.status_code == 403
    assert grant_count() == 1


def test_group_grant_of_cluster_admin_lets_members_grant_in_the_cluster(
    home, caller, make_user, client_for
):
    member = caller("ClusterAdmin", home.cluster, via="group")

    response = client_for(member).post(URL, grant_body("UserRole", home.vm, user=make_user()))

    assert response.status_code == 201, response.content


# Listing and reading grants.


@pytest.fixture
def spread(home, away, make_user, make_group, grant):
    """Grants all over: in and around the home cluster, in another cluster, system-wide."""
    member = make_user("member")
    team = make_group(member, name="team")
    stranger = make_user("stranger")
    return {
        "member-vm": grant(member, "UserRole", home.vm),
        "team-pool": grant(team, "UserRole", home.pool),
        "stranger-vm": grant(stranger, "UserVmManager", home.vm),
        "stranger-cluster": grant(stranger, "PowerUser", home.cluster),
        "stranger-away-vm": grant(stranger, "UserRole", away.vm),
        "stranger-away-cluster": grant(stranger, "PowerUser", away.cluster),
        "stranger-system": grant(stranger, "LeaseUser"),
    }


def _listed(client, **params) -> set[str]:
    return set(listed_ids(client.get(URL, {"limit": 1000, **params})))


def _ids(spread, *names) -> set[str]:
    return {spread[name].id for name in names}


def test_user_sees_their_own_and_their_groups_grants_only(spread, client_for):
    member = User.objects.get(username="member")

    assert _listed(client_for(member)) == _ids(spread, "member-vm", "team-pool")


def test_cluster_admin_sees_grants_on_their_cluster_and_inside_it(
    spread, home, make_user, grant, client_for
):
    cluster_admin = make_user()
    own = grant(cluster_admin, "ClusterAdmin", home.cluster)

    shown = _listed(client_for(cluster_admin))

    inside = _ids(spread, "member-vm", "team-pool", "stranger-vm", "stranger-cluster")
    assert shown == inside | {own.id}


def test_superuser_sees_every_grant(spread, admin_user, client_for):
    assert _listed(client_for(admin_user)) == {g.id for g in spread.values()}


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"role": "PowerUser"}, {"stranger-cluster", "stranger-away-cluster"}),
        ({"user": "member"}, {"member-vm"}),
        ({"group": "team"}, {"team-pool"}),
        ({"object_type": "system"}, {"stranger-system"}),
        ({"object_type": "pool"}, {"team-pool"}),
        ({"user": "stranger", "object_type": "vm"}, {"stranger-vm", "stranger-away-vm"}),
    ],
    ids=lambda value: (
        "-".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else ""
    ),
)
def test_grant_list_filters(params, expected, spread, admin_user, client_for):
    assert _listed(client_for(admin_user), **params) == _ids(spread, *expected)


def test_grant_list_filters_by_object(spread, home, admin_user, client_for):
    shown = _listed(client_for(admin_user), object_type="vm", object_id=home.vm.pk)

    assert shown == _ids(spread, "member-vm", "stranger-vm")


@pytest.mark.parametrize(
    "params, field",
    [
        ({"role": "NoSuchRole"}, "role"),
        ({"user": "nobody-here"}, "user"),
        ({"group": "no-such-group"}, "group"),
        ({"object_type": "planet"}, "object_type"),
        ({"object_id": "first"}, "object_id"),
    ],
    ids=["role", "user", "group", "object_type", "object_id"],
)
def test_grant_list_with_an_unknown_filter_value_is_a_field_error(
    params, field, admin_user, client_for
):
    response = client_for(admin_user).get(URL, params)

    assert response.status_code == 400
    assert field in response.json()


def test_grant_the_caller_may_not_see_is_404(spread, home, caller, client_for):
    cluster_admin = caller("ClusterAdmin", home.cluster)

    response = client_for(cluster_admin).get(f"{URL}{spread['stranger-away-vm'].id}/")

    assert response.status_code == 404


def test_grant_the_caller_may_see_is_returned(spread, home, caller, client_for):
    cluster_admin = caller("ClusterAdmin", home.cluster)

    response = client_for(cluster_admin).get(f"{URL}{spread['team-pool'].id}/")

    assert response.status_code == 200
    assert response.json()["group"] == "team"


def test_grant_list_queries_do_not_grow_with_the_grants(
    home, make_user, grant, caller, client_for, django_assert_max_num_queries
):
    cluster_admin = caller("ClusterAdmin", home.cluster)
    for _ in range(25):
        grant(make_user(), "UserRole", home.vm)
        grant(make_user(), "PowerUser", home.cluster)
    client = client_for(cluster_admin)

    with django_assert_max_num_queries(15):
        response = client.get(URL, {"limit": 1000})

    assert response.json()["count"] == 51


# Revoking.


def test_cluster_admin_revokes_a_grant_and_the_user_loses_access(
    home, caller, grant, make_user, client_for
):
    cluster_admin = caller("ClusterAdmin", home.cluster)
    user = make_user()
    given = grant(user, "UserRole", home.vm)

    response = client_for(cluster_admin).delete(f"{URL}{given.id}/")

    assert response.status_code == 204
    assert client_for(user).get(f"/api/vms/{home.vm.pk}/").status_code == 404


def test_revoking_a_group_grant_removes_access_for_its_members(
    home, caller, make_group, grant, make_user, client_for
):
    member = make_user()
    given = grant(make_group(member), "UserRole", home.vm)

    response = client_for(caller("ClusterAdmin", home.cluster)).delete(f"{URL}{given.id}/")

    assert response.status_code == 204
    assert client_for(member).get(f"/api/vms/{home.vm.pk}/").status_code == 404


def test_user_cannot_revoke_their_own_grant_without_managing_grants(
    home, grant, make_user, client_for
):
    user = make_user()
    given = grant(user, "UserRole", home.vm)

    response = client_for(user).delete(f"{URL}{given.id}/")

    assert response.status_code == 403
    assert client_for(user).get(f"/api/vms/{home.vm.pk}/").status_code == 200


def test_grant_in_another_cluster_cannot_be_revoked(
    home, away, caller, grant, make_user, client_for
):
    given = grant(make_user(), "UserRole", away.vm)

    response = client_for(caller("ClusterAdmin", home.cluster)).delete(f"{URL}{given.id}/")

    assert response.status_code == 404
    assert grant_count() == 2


def test_deleting_an_object_removes_the_grants_on_it(
    home, grant, make_user, make_group, admin_user, client_for
):
    vm = home.vm
    grant(make_user(), "UserRole", vm)
    grant(make_group(), "UserVmManager", vm)
    client = client_for(admin_user)

    assert client.delete(f"/api/vms/{vm.pk}/").status_code == 204

    assert _listed(client, object_type="vm", object_id=vm.pk) == set()
    assert grant_count() == 0


# /api/me/


def test_me_lists_own_and_group_grants(home, away, make_user, make_group, grant, client_for):
    user = make_user()
    own = grant(user, "UserRole", home.vm)
    through_team = grant(make_group(user, name="team"), "PowerUser", home.cluster)
    grant(make_user(), "UserRole", home.vm)

    body = client_for(user).get("/api/me/").json()

    assert body["username"] == user.username
    assert body["groups"] == ["team"]
    assert {(g["id"], g["role"]) for g in body["grants"]} == {
        (own.id, "UserRole"),
        (through_team.id, "PowerUser"),
    }
