"""The leases API in Blazar's words: the request body accepted verbatim, answers with Blazar's
fields, validation, refusals that store nothing, the dry check, updates that are all or
nothing, deleting, limits, and a list whose query count does not grow."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from hosts.models import Job, JobKind, VirtualMachine
from leases import lifecycle
from leases.models import Allocation, EventType, Lease, LeaseEvent, Reservation
from tests.leases.fixtures import PER_HOST, allocations_of, at, instances, whole_hosts

pytestmark = pytest.mark.django_db


def when(moment) -> str:
    """Blazar's time format (UTC, to the minute)."""
    return f"{moment:%Y-%m-%d %H:%M}"


def blazar_body(**changes) -> dict:
    """The body of Blazar's own example of an instance reservation, with future dates."""
    return {
        "name": "instance-reservation-1",
        "reservations": [
            {
                "resource_type": "virtual:instance",
                "vcpus": 4,
                "memory_mb": 4096,
                "disk_gb": 10,
                "amount": 5,
                "affinity": False,
            }
        ],
        "start": when(at(9)),
        "end": when(at(17)),
        "events": [],
        **changes,
    }


def body_for(*requests, start=None, end=None, **changes) -> dict:
    return {
        "name": "lease",
        "start": when(start or at(9)),
        "end": when(end or at(12)),
        "reservations": [dict(r) for r in requests],
        **changes,
    }


def stored() -> tuple[int, int, int, int]:
    return (
        Lease.objects.count(),
        Reservation.objects.count(),
        Allocation.objects.count(),
        LeaseEvent.objects.count(),
    )


@pytest.fixture
def owner(lease_user):
    return lease_user()


@pytest.fixture
def client(owner, client_for):
    return client_for(owner)


@pytest.fixture
def one_host(reservable_hosts):
    """One reservable host: room for three instances of 1024 MiB."""
    return reservable_hosts(1)[0]


def create(client, body: dict) -> dict:
    response = client.post("/api/leases/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def patch(client, lease_id: int, body: dict):
    return client.patch(f"/api/leases/{lease_id}/", body, format="json")


def shown(client, lease_id: int) -> dict:
    response = client.get(f"/api/leases/{lease_id}/")
    assert response.status_code == 200, response.json()
    return response.json()


# -- create ----------------------------------------------------------------------------------


def test_blazars_own_request_body_is_accepted_verbatim(client, reservable_hosts):
    hosts = reservable_hosts(5, memory_mb=8192)

    lease = create(client, blazar_body())

    assert lease["name"] == "instance-reservation-1"
    assert parse_datetime(lease["start_date"]) == at(9)
    assert parse_datetime(lease["end_date"]) == at(17)
    assert lease["status"] == "PENDING"
    assert lease["degraded"] is False
    [reservation] = lease["reservations"]
    assert {
        name: reservation[name]
        for name in ("status", "resource_type", "vcpus", "memory_mb", "disk_gb", "amount")
    } == {
        "status": "pending",
        "resource_type": "virtual:instance",
        "vcpus": 4,
        "memory_mb": 4096,
        "disk_gb": 10,
        "amount": 5,
    }
    assert reservation["affinity"] is False
    assert isinstance(reservation["id"], int)
    assert sorted(a["host"] for a in reservation["allocations"]) == [h.pk for h in hosts]


def test_the_answer_is_the_stored_lease(client, reservable_hosts):
    reservable_hosts(5, memory_mb=8192)

    lease = create(client, blazar_body())

    assert shown(client, lease["id"]) == lease


def test_start_date_and_end_date_are_accepted_too(client, one_host):
    body = body_for(instances(1))
    body["start_date"], body["end_date"] = body.pop("start"), body.pop("end")

    lease = create(client, body)

    assert (parse_datetime(lease["start_date"]), parse_datetime(lease["end_date"])) == (
        at(9),
        at(12),
    )


def test_iso_times_with_a_zone_are_accepted(client, one_host):
    body = body_for(instances(1))
    body["start"] = at(9).astimezone(timezone.get_fixed_timezone(120)).isoformat()

    lease = create(client, body)

    assert parse_datetime(lease["start_date"]) == at(9)


def test_now_starts_the_lease_at_the_time_of_the_request(client, one_host):
    before = timezone.now()

    lease = create(client, body_for(instances(1), end=at(12)) | {"start": "now"})

    assert before <= parse_datetime(lease["start_date"]) <= timezone.now()


def test_the_lease_schedules_its_start_warning_and_end(client, one_host, settings):
    settings.LEASE_BEFORE_END_MINUTES = 30

    lease = create(client, body_for(instances(1), start=at(9), end=at(12)))

    assert {e["event_type"]: parse_datetime(e["time"]) for e in lease["events"]} == {
        "start_lease": at(9),
        "before_end_lease": at(11.5),
        "end_lease": at(12),
    }


def test_whole_hosts_are_reserved_with_a_blazar_hypervisor_expression(client, reservable_hosts):
    reservable_hosts(1, memory_mb=2048)
    [big] = reservable_hosts(1, memory_mb=8192)
    request = {
        "resource_type": "physical:host",
        "min": 1,
        "max": 1,
        "hypervisor_properties": '[">=", "$memory_mb", "4096"]',
        "resource_properties": "",
    }

    lease = create(client, body_for(request))

    [reservation] = lease["reservations"]
    assert reservation["host_properties"] == {"memory_mb": 4096}
    assert reservation["allocations"] == [
        {"host": big.pk, "host_name": big.name, "slots": 0, "whole_host": True}
    ]


def test_the_creator_becomes_the_owner(client, owner, one_host):
    lease = create(client, body_for(instances(1)))

    assert (lease["user_id"], lease["owner"]) == (owner.pk, owner.username)


# -- validation ------------------------------------------------------------------------------


def first_reservation(errors: dict) -> dict:
    """Errors of the first reservation of a request (DRF keys a list's errors by index)."""
    return {"reservations": {"0": errors}}


def reserving(request: dict):
    return lambda body: body | {"reservations": [request]}


INVALID = {
    "end before start": (
        lambda b: b | {"start": when(at(12)), "end": when(at(9))},
        {"end_date": ["The lease must end after it starts."]},
    ),
    "end in the past": (
        lambda b: b | {"start": "2020-01-01 10:00", "end": "2020-01-02 10:00"},
        {"end_date": ["The lease must end in the future."]},
    ),
    "no start": (
        lambda b: {k: v for k, v in b.items() if k != "start"},
        {"start_date": ["Required (or 'start'); 'now' starts the lease at once."]},
    ),
    "bad time format": (
        lambda b: b | {"start": "tomorrow at nine"},
        {"start_date": ["Use 'now', 'YYYY-MM-DD HH:MM' (UTC) or an ISO 8601 time."]},
    ),
    "instance without vcpus": (
        reserving({**instances(1), "vcpus": None}),
        first_reservation({"vcpus": ["This field may not be null."]}),
    ),
    "instance without size or amount": (
        reserving({"resource_type": "virtual:instance"}),
        first_reservation(
            {
                "vcpus": ["Required for virtual:instance."],
                "memory_mb": ["Required for virtual:instance."],
                "amount": ["Required for virtual:instance."],
            }
        ),
    ),
    "hosts without min": (
        reserving({"resource_type": "physical:host", "max": 2}),
        first_reservation({"min": ["Required for physical:host."]}),
    ),
    "max below min": (
        reserving({"resource_type": "physical:host", "min": 3, "max": 2}),
        first_reservation({"max": ["At least min."]}),
    ),
    "unknown resource type": (
        reserving({"resource_type": "virtual:floatingip"}),
        first_reservation({"resource_type": ['"virtual:floatingip" is not a valid choice.']}),
    ),
    "unsupported property expression": (
        reserving({**instances(1), "resource_properties": '["or", ["==", "$gpu", "a100"]]'}),
        first_reservation(
            {
                "resource_properties": [
                    "Unsupported expression ['or', ['==', '$gpu', 'a100']]: use and of terms "
                    "with ==, !=, <, <=, >, >= or in."
                ]
            }
        ),
    ),
    "property expression that is not JSON": (
        reserving({**instances(1), "resource_properties": "[>= $vcpus"}),
        first_reservation({"resource_properties": ["Not valid JSON."]}),
    ),
    "zero instances": (
        reserving(instances(0)),
        first_reservation({"amount": ["Ensure this value is greater than or equal to 1."]}),
    ),
}


def test_a_lease_reserving_nothing_is_accepted_with_its_window_and_events(client, one_host):
    response = client.post("/api/leases/", body_for(), format="json")

    assert response.status_code == 201
    lease = Lease.objects.get(pk=response.json()["id"])
    assert (lease.start_date, lease.end_date, lease.status) == (at(9), at(12), "PENDING")
    assert lease.reservations.count() == 0
    assert set(lease.events.values_list("event_type", flat=True)) == {
        EventType.START,
        EventType.BEFORE_END,
        EventType.END,
    }


def test_a_lease_without_a_reservations_key_reserves_nothing_as_blazar_accepts_it(client, one_host):
    body = body_for()
    del body["reservations"]

    checked = client.post("/api/leases/check/", body, format="json")
    response = client.post("/api/leases/", body, format="json")

    assert checked.json() == {"fits": True, "message": "Fits."}
    assert response.status_code == 201, response.json()
    assert response.json()["reservations"] == []
    lease = Lease.objects.get(pk=response.json()["id"])
    assert (lease.start_date, lease.end_date, lease.reservations.count()) == (at(9), at(12), 0)


def test_the_schema_says_a_lease_may_leave_its_reservations_out(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    body = schema["paths"]["/api/leases/"]["post"]["requestBody"]["content"]["application/json"]

    lease = schema["components"]["schemas"][body["schema"]["$ref"].rsplit("/", 1)[-1]]
    assert "reservations" not in lease.get("required", [])
    assert "reserves nothing" in lease["properties"]["reservations"]["description"]


@pytest.mark.parametrize("spoil, errors", INVALID.values(), ids=INVALID.keys())
def test_invalid_request_is_a_400_with_field_messages_and_stores_nothing(
    client, one_host, spoil, errors
):
    response = client.post("/api/leases/", spoil(body_for(instances(1))), format="json")

    assert response.status_code == 400
    assert response.json() == errors
    assert stored() == (0, 0, 0, 0)


def test_a_lease_that_does_not_fit_is_a_409_saying_what_is_short(client, one_host):
    response = client.post(
        "/api/leases/", body_for(instances(5), start=at(9), end=at(12)), format="json"
    )

    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        f"The lease does not fit: only 3 of 5 instances fit between {when(at(9))} and "
        f"{when(at(12))} (5 instances of 1024 MiB need 5120 MiB free; 3072 are free). "
    )
    assert response.json()["short"] == {
        "resource": "instances",
        "requested": 5,
        "available": 3,
        "limit": {
            "resource": "memory_mb",
            "needed": 5120,
            "available": 3072,
            "scope": "all_hosts",
            "property": None,
        },
    }


def test_a_refused_lease_stores_nothing(client, one_host):
    client.post("/api/leases/", body_for(instances(PER_HOST + 1)), format="json")

    assert stored() == (0, 0, 0, 0)
    assert client.get("/api/leases/").json()["count"] == 0


def test_the_check_says_a_lease_fits_and_reserves_nothing(client, one_host):
    response = client.post("/api/leases/check/", body_for(instances(PER_HOST)), format="json")

    assert response.status_code == 200
    assert response.json() == {"fits": True, "message": "Fits."}
    assert stored() == (0, 0, 0, 0)


def test_the_check_says_what_is_short_and_reserves_nothing(client, one_host):
    response = client.post(
        "/api/leases/check/", body_for(instances(4, affinity=True)), format="json"
    )

    assert response.status_code == 200
    assert response.json() == {
        "fits": False,
        "message": f"Does not fit: only 3 of 4 instances fit on one host between "
        f"{when(at(9))} and {when(at(12))} (4 instances of 1024 MiB need 4096 MiB free on one "
        "host; the freest has 3072).",
    }
    assert stored() == (0, 0, 0, 0)


def test_the_check_validates_like_create(client, one_host):
    response = client.post(
        "/api/leases/check/", body_for(instances(1), start=at(12), end=at(9)), format="json"
    )

    assert response.status_code == 400
    assert response.json() == {"end_date": ["The lease must end after it starts."]}


# -- update ----------------------------------------------------------------------------------


@pytest.fixture
def full_lease(client, one_host):
    """A pending lease from 9:00 to 12:00 holding the whole host (three instances)."""
    return create(client, body_for(instances(PER_HOST), start=at(9), end=at(12)))


def test_extending_a_lease_moves_its_end_and_its_events(client, full_lease):
    response = patch(client, full_lease["id"], {"end_date": when(at(14))})

    assert response.status_code == 200, response.json()
    assert parse_datetime(response.json()["end_date"]) == at(14)
    end = LeaseEvent.objects.get(lease_id=full_lease["id"], event_type=EventType.END)
    assert end.time == at(14)


def test_extending_into_capacity_another_lease_holds_is_refused(client, full_lease, make_lease):
    make_lease(at(13), at(15), instances(1))
    before = shown(client, full_lease["id"])

    response = patch(client, full_lease["id"], {"end_date": when(at(14))})

    assert response.status_code == 409
    assert response.json()["detail"].startswith("The change does not fit: only 2 of 3 instances")
    assert shown(client, full_lease["id"]) == before


def test_shortening_a_lease_frees_the_rest_of_its_window(client, full_lease, make_lease):
    response = patch(client, full_lease["id"], {"end": when(at(10))})

    assert response.status_code == 200, response.json()
    later = make_lease(at(10), at(12), instances(PER_HOST))
    assert sum(allocations_of(later).values()) == PER_HOST


def test_a_pending_lease_can_move_to_another_window(client, full_lease, make_lease):
    response = patch(
        client,
        full_lease["id"],
        {"start_date": when(at(9, day=1)), "end_date": when(at(12, day=1))},
    )

    assert response.status_code == 200, response.json()
    lease = response.json()
    assert (parse_datetime(lease["start_date"]), parse_datetime(lease["end_date"])) == (
        at(9, day=1),
        at(12, day=1),
    )
    start = LeaseEvent.objects.get(lease_id=lease["id"], event_type=EventType.START)
    assert start.time == at(9, day=1)
    assert make_lease(at(9), at(12), instances(PER_HOST)).status == "PENDING"


def test_a_started_lease_cannot_move_its_start(client, full_lease):
    lifecycle.start_lease(Lease.objects.get(pk=full_lease["id"]))
    before = shown(client, full_lease["id"])

    response = patch(client, full_lease["id"], {"start_date": when(at(10))})

    assert response.status_code == 409
    assert response.json() == {
        "detail": "The lease has started; its start cannot move (extend its end)."
    }
    assert shown(client, full_lease["id"]) == before


def test_a_started_lease_can_be_extended(client, full_lease):
    lifecycle.start_lease(Lease.objects.get(pk=full_lease["id"]))

    response = patch(client, full_lease["id"], {"end_date": when(at(13))})

    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "ACTIVE"
    assert parse_datetime(response.json()["end_date"]) == at(13)


def test_the_amount_grows_when_capacity_allows(client, reservable_hosts):
    reservable_hosts(2)
    lease = create(client, body_for(instances(2)))
    [reservation] = lease["reservations"]

    response = patch(
        client, lease["id"], {"reservations": [{"id": reservation["id"], "amount": 5}]}
    )

    assert response.status_code == 200, response.json()
    [grown] = response.json()["reservations"]
    assert grown["amount"] == 5
    assert sum(a["slots"] for a in grown["allocations"]) == 5


def test_the_amount_cannot_grow_past_the_capacity_and_nothing_changes(client, full_lease):
    [reservation] = full_lease["reservations"]
    before = shown(client, full_lease["id"])

    response = patch(
        client,
        full_lease["id"],
        {"name": "renamed", "reservations": [{"id": reservation["id"], "amount": PER_HOST + 1}]},
    )

    assert response.status_code == 409
    assert "only 3 of 4 instances fit" in response.json()["detail"]
    assert shown(client, full_lease["id"]) == before


def test_the_amount_shrinks_and_frees_capacity(client, full_lease, make_lease):
    [reservation] = full_lease["reservations"]

    response = patch(
        client, full_lease["id"], {"reservations": [{"id": reservation["id"], "amount": 1}]}
    )

    assert response.status_code == 200, response.json()
    [shrunk] = response.json()["reservations"]
    assert (shrunk["amount"], sum(a["slots"] for a in shrunk["allocations"])) == (1, 1)
    assert sum(allocations_of(make_lease(at(9), at(12), instances(2))).values()) == 2


@pytest.fixture
def launched_two(client, full_lease, make_vm, make_template):
    """The full lease, started, with two VMs launched into its reservation."""
    lease = Lease.objects.get(pk=full_lease["id"])
    lifecycle.start_lease(lease)
    reservation = lease.reservations.get()
    host = reservation.allocations.get().host
    template = make_template(vcpus=1, memory_mb=1024)
    for _ in range(2):
        make_vm(cluster=host.cluster, template=template, reservation=reservation)
    return shown(client, lease.pk)


def test_the_amount_cannot_shrink_below_the_vms_launched_into_it(client, launched_two):
    [reservation] = launched_two["reservations"]

    response = patch(
        client, launched_two["id"], {"reservations": [{"id": reservation["id"], "amount": 1}]}
    )

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Reservation {reservation['id']} runs 2 VMs; its amount cannot go below that."
    }
    assert shown(client, launched_two["id"]) == launched_two


def test_the_amount_can_shrink_to_the_vms_launched_into_it(client, launched_two):
    [reservation] = launched_two["reservations"]

    response = patch(
        client, launched_two["id"], {"reservations": [{"id": reservation["id"], "amount": 2}]}
    )

    assert response.status_code == 200, response.json()
    assert response.json()["reservations"][0]["launched"] == 2
    assert response.json()["reservations"][0]["amount"] == 2


def test_put_renames_a_lease(client, full_lease):
    response = client.put(f"/api/leases/{full_lease['id']}/", {"name": "renamed"}, format="json")

    assert response.status_code == 200, response.json()
    assert Lease.objects.get(pk=full_lease["id"]).name == "renamed"


def test_an_update_ending_before_the_start_is_a_400(client, full_lease):
    before = shown(client, full_lease["id"])

    response = patch(client, full_lease["id"], {"end_date": when(at(8))})

    assert response.status_code == 400
    assert response.json() == {"end_date": ["The lease must end after it starts."]}
    assert shown(client, full_lease["id"]) == before


def test_an_update_moving_the_lease_into_the_past_is_a_400(client, full_lease):
    before = shown(client, full_lease["id"])

    response = patch(
        client, full_lease["id"], {"start": "2020-01-01 10:00", "end": "2020-01-02 10:00"}
    )

    assert response.status_code == 400
    assert response.json() == {"end_date": ["The lease must end in the future."]}
    assert shown(client, full_lease["id"]) == before


def test_an_update_of_a_reservation_outside_the_lease_is_a_400(client, full_lease, make_lease):
    other = make_lease(at(13), at(14), instances(1)).reservations.get()
    before = shown(client, full_lease["id"])

    response = patch(client, full_lease["id"], {"reservations": [{"id": other.pk, "amount": 1}]})

    assert response.status_code == 400
    assert response.json() == {
        "reservations": [f"Lease {full_lease['name']} has no reservation {other.pk}."]
    }
    assert shown(client, full_lease["id"]) == before
    assert other.allocations.get().slots == 1


def test_an_update_with_a_malformed_amount_is_a_400(client, full_lease):
    response = patch(client, full_lease["id"], {"reservations": [{"amount": 2}]})

    assert response.status_code == 400
    assert response.json() == {
        "reservations": [
            "Each item changes a reservation (give its id) or adds one (give its resource_type)."
        ]
    }


def test_an_ended_lease_cannot_change(client, full_lease):
    lifecycle.end_lease(Lease.objects.get(pk=full_lease["id"]))

    response = patch(client, full_lease["id"], {"end_date": when(at(13))})

    assert response.status_code == 409
    assert "has ended" in response.json()["detail"]


# -- delete ----------------------------------------------------------------------------------


def test_deleting_a_lease_removes_it_and_frees_its_capacity(client, full_lease, make_lease):
    response = client.delete(f"/api/leases/{full_lease['id']}/")

    assert response.status_code == 204
    assert stored() == (0, 0, 0, 0)
    assert make_lease(at(9), at(12), instances(PER_HOST)).status == "PENDING"


def test_deleting_a_started_lease_stops_its_vms_and_keeps_them(client, launched_two):
    VirtualMachine.objects.update(status="up")

    response = client.delete(f"/api/leases/{launched_two['id']}/")

    assert response.status_code == 204
    vms = VirtualMachine.objects.all()
    assert [vm.reservation_id for vm in vms] == [None, None]
    assert Job.objects.filter(kind=JobKind.POWEROFF, vm__in=vms).count() == 2


# -- limits ----------------------------------------------------------------------------------


def test_a_lease_longer_than_the_longest_allowed_is_refused(client, one_host, settings):
    settings.LEASE_MAX_DURATION_DAYS = 1

    response = client.post(
        "/api/leases/",
        body_for(instances(1), start=at(9), end=at(9, day=1) + timedelta(minutes=1)),
        format="json",
    )

    assert response.status_code == 409
    assert response.json() == {"detail": "A lease may last at most 1 days."}
    assert stored() == (0, 0, 0, 0)


def test_a_lease_cannot_be_extended_past_the_longest_allowed(client, full_lease, settings):
    settings.LEASE_MAX_DURATION_DAYS = 1

    response = patch(client, full_lease["id"], {"end_date": when(at(10, day=1))})

    assert response.status_code == 409
    assert response.json() == {"detail": "A lease may last at most 1 days."}


QUOTAS = {
    "instances": ("LEASE_QUOTA_INSTANCES", 4, "5 instances", "4 instances"),
    "vcpus": ("LEASE_QUOTA_VCPUS", 4, "5 vCPUs", "4 vCPUs"),
    "memory": ("LEASE_QUOTA_MEMORY_MB", 4096, "5120 MiB of memory", "4096 MiB of memory"),
}


@pytest.mark.parametrize("setting, limit, held, quota", QUOTAS.values(), ids=QUOTAS.keys())
def test_leases_held_at_once_beyond_a_quota_are_refused(
    client, reservable_hosts, settings, setting, limit, held, quota
):
    setattr(settings, setting, limit)
    reservable_hosts(2)
    create(client, body_for(instances(3), start=at(9), end=at(12)))

    response = client.post(
        "/api/leases/", body_for(instances(2), start=at(11), end=at(13)), format="json"
    )

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Your leases would hold {held} at once; your quota is {quota}."
    }
    assert Lease.objects.count() == 1


def test_a_quota_counts_only_leases_at_the_same_time(client, reservable_hosts, settings):
    settings.LEASE_QUOTA_INSTANCES = 4
    reservable_hosts(2)
    create(client, body_for(instances(3), start=at(9), end=at(12)))

    lease = create(client, body_for(instances(3), start=at(12), end=at(14)))

    assert lease["status"] == "PENDING"


def test_a_quota_is_per_user(client, reservable_hosts, settings, make_lease):
    settings.LEASE_QUOTA_INSTANCES = 4
    reservable_hosts(2)
    make_lease(at(9), at(12), instances(3))

    lease = create(client, body_for(instances(3), start=at(9), end=at(12)))

    assert lease["status"] == "PENDING"


WHOLE_HOST_QUOTAS = {
    "instances": ("LEASE_QUOTA_INSTANCES", 2, "3 instances", "2 instances"),
    "vcpus": ("LEASE_QUOTA_VCPUS", 17, "18 vCPUs", "17 vCPUs"),
    "memory": ("LEASE_QUOTA_MEMORY_MB", 4096, "5120 MiB of memory", "4096 MiB of memory"),
}


@pytest.mark.parametrize("first_the_host", [True, False], ids=["host-first", "host-second"])
@pytest.mark.parametrize(
    "setting, limit, held, quota", WHOLE_HOST_QUOTAS.values(), ids=WHOLE_HOST_QUOTAS.keys()
)
def test_a_whole_host_counts_against_the_quotas_by_its_cpus_and_memory(
    client, reservable_hosts, settings, setting, limit, held, quota, first_the_host
):
    setattr(settings, setting, limit)
    reservable_hosts(2)  # 16 CPUs and 3072 MiB each
    host, two = whole_hosts(1), instances(2)  # 1 + 2 instances, 16 + 2 vCPUs, 5120 MiB
    first, second = (host, two) if first_the_host else (two, host)
    create(client, body_for(first))

    response = client.post("/api/leases/", body_for(second), format="json")

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Your leases would hold {held} at once; your quota is {quota}."
    }
    assert Lease.objects.count() == 1


# -- list ------------------------------------------------------------------------------------


def _leases_with_vms(owner, count: int, make_lease, make_vm, template) -> None:
    for _ in range(count):
        lease = make_lease(at(9), at(10), instances(1), instances(1), owner=owner)
        lifecycle.start_lease(lease)
        for reservation in lease.reservations.all():
            host = reservation.allocations.get().host
            make_vm(cluster=host.cluster, template=template, reservation=reservation)


def test_the_list_takes_the_same_queries_for_one_lease_or_many(
    client,
    owner,
    reservable_hosts,
    make_lease,
    make_vm,
    make_template,
    django_assert_max_num_queries,
):
    reservable_hosts(6)
    template = make_template(vcpus=1, memory_mb=1024)
    _leases_with_vms(owner, 1, make_lease, make_vm, template)
    with django_assert_max_num_queries(12) as few:
        assert client.get("/api/leases/").json()["count"] == 1

    _leases_with_vms(owner, 8, make_lease, make_vm, template)

    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get("/api/leases/")
    assert response.json()["count"] == 9
    assert all(
        r["launched"] == 1 for lease in response.json()["results"] for r in lease["reservations"]
    )
