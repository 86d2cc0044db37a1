"""Who may do what with leases: LeaseUser creates, the owner sees, changes and deletes their
own leases only, another user's lease does not exist for them (for every method: Blazar let
any user change or delete any lease), and admins see all."""

import pytest
from django.contrib.auth.models import Group

from hosts.models import VirtualMachine
from leases import lifecycle
from leases.models import Lease
from project.access.permissions import holds
from tests.conftest import unique
from tests.leases.fixtures import at, instances

pytestmark = pytest.mark.django_db


def body(**changes) -> dict:
    return {
        "name": "mine",
        "start": f"{at(9):%Y-%m-%d %H:%M}",
        "end": f"{at(12):%Y-%m-%d %H:%M}",
        "reservations": [instances(1)],
        **changes,
    }


@pytest.fixture(autouse=True)
def hosts(reservable_hosts):
    return reservable_hosts(2)


@pytest.fixture
def alice(lease_user):
    return lease_user("alice")


@pytest.fixture
def bob(lease_user):
    return lease_user("bob")


@pytest.fixture
def alices_lease(make_lease, alice):
    return make_lease(at(9), at(12), instances(1), owner=alice, name="alices")


def listed(client) -> list[int]:
    response = client.get("/api/leases/")
    assert response.status_code == 200, response.json()
    return [lease["id"] for lease in response.json()["results"]]


# -- create ----------------------------------------------------------------------------------


def test_a_lease_user_may_create_a_lease_and_owns_it(alice, client_for):
    response = client_for(alice).post("/api/leases/", body(), format="json")

    assert response.status_code == 201, response.json()
    lease = Lease.objects.get(pk=response.json()["id"])
    assert lease.owner == alice
    assert holds(alice, "leases.change_lease", lease)
    assert holds(alice, "leases.delete_lease", lease)


def test_a_user_without_lease_user_may_not_create_a_lease(make_user, client_for):
    response = client_for(make_user()).post("/api/leases/", body(), format="json")

    assert response.status_code == 403
    assert response.json() == {"detail": "Creating leases needs the LeaseUser role."}
    assert not Lease.objects.exists()


def test_a_user_without_lease_user_may_not_check_capacity(make_user, client_for):
    response = client_for(make_user()).post("/api/leases/check/", body(), format="json")

    assert response.status_code == 403


def test_owning_a_lease_does_not_allow_creating_others(make_user, make_lease, client_for):
    owner = make_user()
    make_lease(at(9), at(12), instances(1), owner=owner)

    response = client_for(owner).post("/api/leases/", body(), format="json")

    assert response.status_code == 403


# -- the owner -------------------------------------------------------------------------------


def test_the_owner_lists_only_their_own_leases(alice, bob, alices_lease, make_lease, client_for):
    make_lease(at(9), at(12), instances(1), owner=bob)

    assert listed(client_for(alice)) == [alices_lease.pk]


def test_the_owner_changes_their_lease(alice, alices_lease, client_for):
    response = client_for(alice).patch(
        f"/api/leases/{alices_lease.pk}/", {"name": "renamed"}, format="json"
    )

    assert response.status_code == 200, response.json()
    assert Lease.objects.get(pk=alices_lease.pk).name == "renamed"


def test_the_owner_deletes_their_lease(alice, alices_lease, client_for):
    response = client_for(alice).delete(f"/api/leases/{alices_lease.pk}/")

    assert response.status_code == 204
    assert not Lease.objects.filter(pk=alices_lease.pk).exists()


def test_deleting_a_lease_is_said_in_the_event_feed_to_its_owner_only(
    alice, bob, alices_lease, client_for
):
    client_for(alice).delete(f"/api/leases/{alices_lease.pk}/")

    said = [
        (e["object_type"], e["object_id"], e["message"])
        for e in client_for(alice).get("/api/events/").json()["events"]
    ]
    assert ("lease", alices_lease.pk, "Lease alices deleted") in said
    unseen = client_for(bob).get("/api/events/").json()["events"]
    assert [e for e in unseen if e["object_id"] == alices_lease.pk] == []


# -- another user ----------------------------------------------------------------------------

OTHERS = {
    "GET": ("get", None),
    "PUT": ("put", {"name": "taken"}),
    "PATCH": ("patch", {"end_date": f"{at(13):%Y-%m-%d %H:%M}"}),
    "DELETE": ("delete", None),
}


@pytest.mark.parametrize("method, payload", OTHERS.values(), ids=OTHERS.keys())
def test_another_users_lease_does_not_exist_for_them(
    bob, alices_lease, client_for, method, payload
):
    before = Lease.objects.filter(pk=alices_lease.pk).values().get()

    response = getattr(client_for(bob), method)(
        f"/api/leases/{alices_lease.pk}/", payload, format="json"
    )

    assert response.status_code == 404
    assert Lease.objects.filter(pk=alices_lease.pk).values().get() == before


def test_another_users_lease_is_not_listed(bob, alices_lease, client_for):
    assert listed(client_for(bob)) == []


def test_another_users_reservation_cannot_be_launched_into(
    bob, alices_lease, client_for, make_template
):
    lifecycle.start_lease(alices_lease)
    template = make_template(cluster=None, vcpus=1, memory_mb=1024)
    reservation = alices_lease.reservations.get()

    response = client_for(bob).post(
        "/api/vms/",
        {"name": unique("vm"), "template": template.pk, "reservation": reservation.pk},
        format="json",
    )

    assert response.status_code == 400
    assert "does not exist" in response.json()["reservation"][0]
    assert not VirtualMachine.objects.exists()


def test_a_lease_granted_to_a_group_is_managed_by_its_members(
    alices_lease, make_user, grant, client_for
):
    team = Group.objects.create(name=unique("team"))
    member = make_user()
    team.user_set.add(member)
    grant(team, "LeaseOwner", alices_lease)

    response = client_for(member).patch(
        f"/api/leases/{alices_lease.pk}/", {"name": "team-lease"}, format="json"
    )

    assert response.status_code == 200, response.json()


def test_a_lease_created_for_a_group_is_seen_by_its_members_only(alice, bob, make_user, client_for):
    team = Group.objects.create(name=unique("team"))
    member = make_user()
    team.user_set.add(alice, member)

    response = client_for(alice).post("/api/leases/", body(group=team.name), format="json")

    assert response.status_code == 201, response.json()
    lease_id = response.json()["id"]
    assert response.json()["group"] == team.name
    seen = client_for(member).get(f"/api/leases/{lease_id}/")
    assert (seen.status_code, seen.json()["name"]) == (200, "mine")
    assert listed(client_for(member)) == [lease_id]
    assert client_for(bob).get(f"/api/leases/{lease_id}/").status_code == 404


@pytest.mark.parametrize("exists", [True, False], ids=["not-a-member", "no-such-group"])
def test_a_lease_cannot_be_given_to_a_group_its_creator_is_not_in(alice, bob, client_for, exists):
    name = unique("team")
    if exists:
        Group.objects.create(name=name).user_set.add(bob)

    response = client_for(alice).post("/api/leases/", body(group=name), format="json")

    assert response.status_code == 400
    assert response.json() == {"group": [f"You are not a member of a group named {name!r}."]}
    assert not Lease.objects.exists()


# -- admins ----------------------------------------------------------------------------------


def test_a_superuser_sees_every_lease(admin_user, alice, bob, make_lease, client_for):
    leases = [make_lease(at(9), at(10), instances(1), owner=who) for who in (alice, bob)]

    assert sorted(listed(client_for(admin_user))) == sorted(lease.pk for lease in leases)


def test_a_system_superuser_role_sees_and_deletes_any_lease(
    make_user, grant, alices_lease, client_for
):
    admin = make_user()
    grant(admin, "SuperUser")

    assert listed(client_for(admin)) == [alices_lease.pk]
    assert client_for(admin).delete(f"/api/leases/{alices_lease.pk}/").status_code == 204
