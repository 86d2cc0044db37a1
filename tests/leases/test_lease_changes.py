"""No silent success in /api/leases/: every field a lease body may carry is applied, and any
other field is a 400 naming it with nothing changed."""

from __future__ import annotations

import pytest

from hosts.models import VirtualMachine
from leases.models import Lease
from tests.conftest import unique
from tests.leases.fixtures import at, instances, whole_hosts


def when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M}"


@pytest.fixture
def client(lease_user, client_for):
    return client_for(lease_user())


def create(client, *reservations, **fields):
    body = {"name": unique("l"), "start_date": when(at(9)), "end_date": when(at(12))}
    body.update(fields, reservations=list(reservations))
    return client.post("/api/leases/", body, format="json")


def patch(client, lease_id: int, body: dict):
    return client.patch(f"/api/leases/{lease_id}/", body, format="json")


@pytest.mark.parametrize(
    "reservation, field, message",
    [
        ({**whole_hosts(1), "amount": 2}, "amount", "Not a field of physical:host reservations."),
        ({**instances(1), "max": 2}, "max", "Not a field of virtual:instance reservations."),
        (
            {**instances(1), "network_id": "x"},
            "network_id",
            "Unknown field; Corral does not apply it.",
        ),
    ],
)
def test_a_reservation_field_that_does_not_apply_is_a_400(
    client, reservable_hosts, reservation, field, message
):
    reservable_hosts(1)

    response = create(client, reservation)

    assert response.status_code == 400
    assert response.json() == {"reservations": {"0": {field: [message]}}}
    assert not Lease.objects.exists()


@pytest.mark.parametrize(
    "fields, name",
    [({"trust_id": "t"}, "trust_id"), ({"events": [{"event_type": "notification"}]}, "events")],
)
def test_a_lease_field_that_does_not_apply_is_a_400(client, reservable_hosts, fields, name):
    reservable_hosts(1)

    response = create(client, instances(1), **fields)

    assert response.status_code == 400
    assert list(response.json()) == [name]
    assert not Lease.objects.exists()


@pytest.fixture
def lease(client, reservable_hosts):
    reservable_hosts(2)
    response = create(client, instances(2))
    assert response.status_code == 201, response.json()
    return response.json()


def test_before_end_date_is_applied_on_update(client, lease):
    response = patch(client, lease["id"], {"before_end_date": when(at(10))})

    assert response.status_code == 200, response.json()
    assert response.json()["before_end_date"].startswith(f"{at(10):%Y-%m-%dT%H:%M}")
    stored = Lease.objects.get(pk=lease["id"])
    assert stored.events.get(event_type="before_end_lease").time == at(10)


def test_a_before_end_date_outside_the_lease_is_a_400(client, lease):
    response = patch(client, lease["id"], {"before_end_date": when(at(13))})

    assert response.status_code == 400
    assert response.json() == {"before_end_date": ["Between the start and the end of the lease."]}


def test_the_size_and_properties_of_a_reservation_change(client, lease, reservable_hosts):
    reservation = lease["reservations"][0]["id"]
    reservable_hosts(1, capabilities={"gpu": "a100"})
    change = {
        "id": reservation,
        "vcpus": 2,
        "memory_mb": 512,
        "disk_gb": 5,
        "amount": 1,
        "resource_properties": '["==", "$gpu", "a100"]',
    }

    response = patch(client, lease["id"], {"reservations": [change]})

    assert response.status_code == 200, response.json()
    shown = response.json()["reservations"][0]
    assert (shown["vcpus"], shown["memory_mb"], shown["disk_gb"], shown["amount"]) == (
        2,
        512,
        5,
        1,
    )
    assert shown["host_properties"] == {"gpu": "a100"}
    assert shown["allocations"][0]["host_name"].startswith("rhost")


def test_min_and_max_of_a_whole_host_reservation_change(client, reservable_hosts):
    reservable_hosts(3)
    made = create(client, whole_hosts(1)).json()
    reservation = made["reservations"][0]["id"]

    response = patch(client, made["id"], {"reservations": [{"id": reservation, "max": 3}]})

    assert response.status_code == 200, response.json()
    assert len(response.json()["reservations"][0]["allocations"]) == 3


@pytest.mark.parametrize(
    "change, message",
    [
        ({"min": 2}, "Reservation {id} is virtual:instance; it has no min."),
        (
            {"resource_type": "physical:host"},
            "Reservation {id} is virtual:instance; its resource_type cannot change.",
        ),
        ({"flavor_id": "x"}, None),
    ],
)
def test_a_reservation_change_that_does_not_apply_is_a_400(client, lease, change, message):
    reservation = lease["reservations"][0]["id"]

    response = patch(client, lease["id"], {"reservations": [{"id": reservation, **change}]})

    assert response.status_code == 400
    if message is None:
        assert response.json() == {
            "reservations": {"0": {"flavor_id": ["Unknown field; Corral does not apply it."]}}
        }
    else:
        assert response.json() == {"reservations": [message.format(id=reservation)]}
    assert Lease.objects.get(pk=lease["id"]).reservations.get().amount == 2


def test_an_unknown_update_field_is_a_400(client, lease):
    response = patch(client, lease["id"], {"end_date": when(at(13)), "degraded": True})

    assert response.status_code == 400
    assert response.json() == {"degraded": ["Unknown field; Corral does not apply it."]}
    assert Lease.objects.get(pk=lease["id"]).end_date == at(12)


def test_a_reservation_cannot_shrink_below_a_running_vm(client, lease, make_template):
    stored = Lease.objects.get(pk=lease["id"]).reservations.get()
    host = stored.allocations.first().host
    VirtualMachine.objects.create(
        name=unique("vm"),
        cluster=host.cluster,
        template=make_template(),
        host=host,
        reservation=stored,
        vcpus=1,
        memory_mb=1024,
        disk_gb=1,
    )

    response = patch(client, lease["id"], {"reservations": [{"id": stored.pk, "memory_mb": 512}]})

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Reservation {stored.pk} runs a VM of 1024 MiB of memory; its memory_mb "
        "cannot go below that."
    }
    stored.refresh_from_db()
    assert stored.memory_mb == 1024


def test_prolong_for_moves_the_end_in_corrals_api_too(client, lease):
    response = patch(client, lease["id"], {"prolong_for": "90m"})

    assert response.status_code == 200, response.json()
    assert Lease.objects.get(pk=lease["id"]).end_date == at(13.5)


def test_a_whole_host_reservation_whose_max_goes_below_its_min_is_a_400(client, reservable_hosts):
    reservable_hosts(3)
    made = create(client, whole_hosts(2)).json()
    reservation = made["reservations"][0]["id"]

    response = patch(client, made["id"], {"reservations": [{"id": reservation, "max": 1}]})

    assert response.status_code == 400
    assert response.json() == {
        "reservations": [f"Reservation {reservation}: max must be at least min."]
    }
    assert len(Lease.objects.get(pk=made["id"]).reservations.get().allocations.all()) == 2
