"""A lease that does not fit says why: the API's 409 names what runs short and by how much, and
the earliest window of the same length that would fit (found with a fixed number of queries,
however many leases the fleet holds), or that none does within 30 days."""

from datetime import timedelta

import pytest
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from leases.models import Allocation, Lease, LeaseStatus, Reservation, ResourceType
from tests.leases.fixtures import PER_HOST, at, instances, whole_hosts

pytestmark = pytest.mark.django_db


def when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M}"


def body_for(*requests, start, end) -> dict:
    return {
        "name": "lease",
        "start": when(start),
        "end": when(end),
        "reservations": [dict(r) for r in requests],
    }


@pytest.fixture
def client(lease_user, client_for, time_machine):
    time_machine.move_to(at(0), tick=False)  # the requests below start later today
    return client_for(lease_user())


def test_a_lease_that_does_not_fit_says_what_is_short_and_the_earliest_window_that_fits(
    client, reservable_hosts, make_lease
):
    reservable_hosts(1)
    make_lease(at(8), at(10), instances(2))
    make_lease(at(9), at(14), instances(1))

    response = client.post(
        "/api/leases/", body_for(instances(2), start=at(9), end=at(11)), format="json"
    )

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"The lease does not fit: only 0 of 2 instances fit between {when(at(9))} and "
        f"{when(at(11))} (2 instances of 1024 MiB need 2048 MiB free; 0 are free). The earliest "
        f"2-hour window that fits starts {when(at(10))} (UTC).",
        "short": {
            "resource": "instances",
            "requested": 2,
            "available": 0,
            "limit": {
                "resource": "memory_mb",
                "needed": 2048,
                "available": 0,
                "scope": "all_hosts",
                "property": None,
            },
        },
        "earliest_fit": {
            "start": f"{at(10):%Y-%m-%dT%H:%M:%SZ}",
            "end": f"{at(12):%Y-%m-%dT%H:%M:%SZ}",
        },
    }
    assert Lease.objects.count() == 2


def test_the_earliest_window_counts_every_reservation_of_the_lease(
    client, reservable_hosts, make_lease
):
    reservable_hosts(2)
    make_lease(at(8), at(12), instances(PER_HOST))  # fills one host until 12:00
    make_lease(at(8), at(15), instances(PER_HOST))  # and the other until 15:00

    response = client.post(
        "/api/leases/",
        body_for(whole_hosts(1), instances(1), start=at(9), end=at(10)),
        format="json",
    )

    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        f"The lease does not fit: reservation 1: only 0 of 1 hosts with those properties are "
        f"free between {when(at(9))} and {when(at(10))} (2 reservable hosts are up; all of them "
        "hold other reservations or VMs then). The earliest 1-hour window that fits starts "
        f"{when(at(15))} (UTC)."
    )
    assert response.json()["short"] == {
        "resource": "hosts",
        "requested": 1,
        "available": 0,
        "limit": {
            "resource": "hosts",
            "needed": 1,
            "available": 0,
            "scope": "all_hosts",
            "property": None,
        },
    }


def test_a_lease_that_fits_nowhere_within_30_days_says_so(client, reservable_hosts, make_lease):
    reservable_hosts(1)
    make_lease(at(8), at(8, day=31), instances(PER_HOST))

    response = client.post(
        "/api/leases/", body_for(instances(1), start=at(9), end=at(12)), format="json"
    )

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"The lease does not fit: only 0 of 1 instance fit between {when(at(9))} and "
        f"{when(at(12))} (1 instance of 1024 MiB needs 1024 MiB free; 0 are free). No 3-hour "
        f"window that starts in the 30 days after {when(at(9))} (UTC) fits.",
        "short": {
            "resource": "instances",
            "requested": 1,
            "available": 0,
            "limit": {
                "resource": "memory_mb",
                "needed": 1024,
                "available": 0,
                "scope": "all_hosts",
                "property": None,
            },
        },
        "earliest_fit": None,
    }


def _fill(hosts, owner, leases_per_host: int) -> None:
    """Book every host full with back-to-back 2-hour leases from 00:00, each host's ten minutes
    later than the previous one's, as rows (as create_lease would store them)."""
    leases, reservations, allocations = [], [], []
    for index, host in enumerate(hosts):
        for turn in range(leases_per_host):
            start = at(0) + timedelta(minutes=10 * index, hours=2 * turn)
            lease = Lease(
                name=f"busy-{index}-{turn}",
                owner=owner,
                start_date=start,
                end_date=start + timedelta(hours=2),
                status=LeaseStatus.PENDING,
            )
            reservation = Reservation(
                lease=lease,
                resource_type=ResourceType.INSTANCE,
                vcpus=1,
                memory_mb=1024,
                disk_gb=10,
                amount=PER_HOST,
            )
            leases.append(lease)
            reservations.append(reservation)
            allocations.append(Allocation(reservation=reservation, host=host, slots=PER_HOST))
    Lease.objects.bulk_create(leases)
    for reservation in reservations:
        reservation.lease_id = reservation.lease.pk
    Reservation.objects.bulk_create(reservations)
    for allocation in allocations:
        allocation.reservation_id = allocation.reservation.pk
    Allocation.objects.bulk_create(allocations)


def test_the_earliest_window_is_found_in_a_busy_fleet_with_a_fixed_number_of_queries(
    client, reservable_hosts, lease_user, django_assert_max_num_queries
):
    hosts = reservable_hosts(10)
    _fill(hosts, lease_user(), leases_per_host=30)  # 300 leases, the first free at 60:00
    first_free = at(0) + timedelta(hours=60)

    with django_assert_max_num_queries(10):
        response = client.post(
            "/api/leases/", body_for(instances(1), start=at(9), end=at(11)), format="json"
        )

    assert response.status_code == 409
    window = response.json()["earliest_fit"]
    assert (parse_datetime(window["start"]), parse_datetime(window["end"])) == (
        first_free,
        first_free + timedelta(hours=2),
    )


def test_the_schema_documents_what_runs_short_and_the_earliest_window_of_a_refused_lease():
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]

    conflict = schema["paths"]["/api/leases/"]["post"]["responses"]["409"]
    body = components[conflict["content"]["application/json"]["schema"]["$ref"].split("/")[-1]]
    short = components[body["properties"]["short"]["$ref"].split("/")[-1]]
    window = body["properties"]["earliest_fit"]
    assert body["required"] == ["detail"]
    assert sorted(short["required"]) == ["available", "requested", "resource"]
    assert window["nullable"] is True
    window = components[window["allOf"][0]["$ref"].split("/")[-1]]
    assert window["properties"]["start"] == {"type": "string", "format": "date-time"}
    assert sorted(window["required"]) == ["end", "start"]
    limit = components[short["properties"]["limit"]["$ref"].split("/")[-1]]
    assert sorted(limit["required"]) == ["available", "needed", "property", "resource", "scope"]


def _refusal(client, *requests) -> dict:
    """The 409 of a lease of ``requests`` from 9:00 to 17:00."""
    response = client.post(
        "/api/leases/", body_for(*requests, start=at(9), end=at(17)), format="json"
    )
    assert response.status_code == 409, response.json()
    return response.json()


def test_an_instance_larger_than_any_host_says_what_it_asks_and_what_the_largest_host_has(
    client, reservable_hosts
):
    reservable_hosts(2, cpus=4)  # 16 vCPUs each, at the default overcommit of 4

    refused = _refusal(client, instances(2, vcpus=64))

    assert refused["detail"].startswith(
        f"The lease does not fit: only 0 of 2 instances fit between {when(at(9))} and "
        f"{when(at(17))} (each instance asks 64 vCPUs; the largest reservable host has 16)."
    )
    assert refused["short"]["limit"] == {
        "resource": "vcpus",
        "needed": 64,
        "available": 16,
        "scope": "instance",
        "property": None,
    }


def test_a_window_short_of_vcpus_says_how_many_its_instances_need_and_how_many_are_free(
    client, reservable_hosts
):
    reservable_hosts(1, cpus=4, memory_mb=65536)  # 16 vCPUs; memory to spare

    refused = _refusal(client, instances(3, vcpus=8))

    assert refused["detail"].startswith(
        f"The lease does not fit: only 2 of 3 instances fit between {when(at(9))} and "
        f"{when(at(17))} (3 instances of 8 vCPUs need 24 vCPUs free; 16 are free)."
    )
    assert refused["short"]["limit"] == {
        "resource": "vcpus",
        "needed": 24,
        "available": 16,
        "scope": "all_hosts",
        "property": None,
    }


def test_free_vcpus_spread_over_hosts_too_thinly_say_how_many_instances_they_hold(
    client, reservable_hosts
):
    reservable_hosts(3, cpus=3, memory_mb=65536)  # 12 vCPUs each: one instance of 8 each

    refused = _refusal(client, instances(4, vcpus=8))

    assert (
        "(4 instances of 8 vCPUs need 32 vCPUs free; 36 are free, but spread over hosts so "
        "that only 3 fit)"
    ) in refused["detail"]


def test_instances_on_one_host_say_what_the_freest_host_has(client, reservable_hosts):
    reservable_hosts(2, cpus=4, memory_mb=65536)

    refused = _refusal(client, instances(3, vcpus=8, affinity=True))

    assert (
        "only 2 of 3 instances fit on one host between "
        f"{when(at(9))} and {when(at(17))} (3 instances of 8 vCPUs need 24 vCPUs free on one "
        "host; the freest has 16)"
    ) in refused["detail"]
    assert refused["short"]["limit"]["scope"] == "one_host"


def test_instances_on_distinct_hosts_say_how_many_hosts_they_need(client, reservable_hosts):
    reservable_hosts(2)

    refused = _refusal(client, instances(3, affinity=False))

    assert (
        "(3 instances on distinct hosts need 3 reservable hosts that are up; 2 are)"
        in refused["detail"]
    )
    assert refused["short"]["limit"] == {
        "resource": "hosts",
        "needed": 3,
        "available": 2,
        "scope": "all_hosts",
        "property": None,
    }


def test_whole_hosts_say_which_property_too_few_reservable_hosts_offer(client, reservable_hosts):
    reservable_hosts(1, capabilities={"gpu": "a100", "rack": "r1"})
    reservable_hosts(2, capabilities={"gpu": "t4", "rack": "r1"})

    refused = _refusal(client, whole_hosts(2, gpu="a100", rack="r1"))

    assert refused["detail"].startswith(
        "The lease does not fit: only 1 of 2 hosts with those properties are free between "
        f"{when(at(9))} and {when(at(17))} (only 1 reservable host offers gpu == a100)."
    )
    assert refused["short"] == {
        "resource": "hosts",
        "requested": 2,
        "available": 1,
        "limit": {
            "resource": "hosts",
            "needed": 2,
            "available": 1,
            "scope": "all_hosts",
            "property": "gpu",
        },
    }


def test_whole_hosts_say_how_many_of_those_offering_them_are_up(client, reservable_hosts):
    reservable_hosts(1)
    reservable_hosts(2, status="maintenance")

    refused = _refusal(client, whole_hosts(2))

    assert "(only 1 of the 3 reservable hosts is up)" in refused["detail"]
