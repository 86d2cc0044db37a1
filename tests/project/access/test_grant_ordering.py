"""The grant list (``/api/permissions/``) sorts by role, principal or object type on request."""

from __future__ import annotations

import pytest

from tests.project.access.conftest import listed_ids

pytestmark = pytest.mark.django_db

URL = "/api/permissions/"


@pytest.fixture
def four(home, make_user, make_group, grant):
    """Four grants whose roles, principals and scopes each sort differently."""
    alice, bob = make_user("alice"), make_user("bob")
    crew = make_group(name="crew")
    return {
        "alice-vm": grant(alice, "UserRole", home.vm).id,
        "crew-cluster": grant(crew, "PowerUser", home.cluster).id,
        "bob-system": grant(bob, "LeaseUser").id,
        "bob-pool": grant(bob, "PoolAdmin", home.pool).id,
    }


def _order(client, ordering: str, **params) -> list[str]:
    return listed_ids(client.get(URL, {"ordering": ordering, "limit": 100, **params}))


def _ids(four, *names) -> list[str]:
    return [four[name] for name in names]


@pytest.mark.parametrize(
    "ordering, expected",
    [
        ("role", ["bob-system", "bob-pool", "crew-cluster", "alice-vm"]),
        ("-role", ["alice-vm", "crew-cluster", "bob-pool", "bob-system"]),
        ("principal", ["alice-vm", "bob-system", "bob-pool", "crew-cluster"]),
        ("-principal", ["crew-cluster", "bob-system", "bob-pool", "alice-vm"]),
        ("object_type", ["bob-system", "crew-cluster", "bob-pool", "alice-vm"]),
        ("-object_type", ["alice-vm", "bob-pool", "crew-cluster", "bob-system"]),
        ("principal,-role", ["alice-vm", "bob-pool", "bob-system", "crew-cluster"]),
    ],
)
def test_grants_are_listed_in_the_order_asked(ordering, expected, four, admin_user, client_for):
    assert _order(client_for(admin_user), ordering) == _ids(four, *expected)


def test_ordering_applies_before_the_page_is_cut(four, admin_user, client_for):
    response = client_for(admin_user).get(URL, {"ordering": "-object_type", "limit": 2})

    assert listed_ids(response) == _ids(four, "alice-vm", "bob-pool")
    assert response.json()["count"] == 4


def test_ordering_keeps_the_filters_and_what_the_caller_may_see(four, home, caller, client_for):
    cluster_admin = caller("ClusterAdmin", home.cluster)
    own = client_for(cluster_admin).get(URL, {"limit": 100}).json()["results"]
    own_id = next(g["id"] for g in own if g["role"] == "ClusterAdmin")

    shown = _order(client_for(cluster_admin), "role")

    # ClusterAdmin, PoolAdmin, PowerUser, UserRole: not bob's system-wide LeaseUser.
    assert shown == [own_id, *_ids(four, "bob-pool", "crew-cluster", "alice-vm")]
    assert _order(client_for(cluster_admin), "-role", user="bob") == _ids(four, "bob-pool")


def test_unknown_ordering_is_a_field_error(admin_user, client_for):
    response = client_for(admin_user).get(URL, {"ordering": "colour"})

    assert response.status_code == 400
    assert "colour" in str(response.json()["ordering"])
