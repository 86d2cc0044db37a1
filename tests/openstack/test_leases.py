"""Blazar's leases over HTTP: bodies as Blazar's client sends them, answers as it reads them,
the same grants as Corral's own API, and every error in Blazar's shape."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from hosts.models import Job
from leases import lifecycle
from leases.models import Lease, LeaseStatus
from openstack.compute.group_ids import reservation_group_id
from project.access.roles import ensure_grant_permissions
from project.models import Role
from tests.leases.fixtures import at, instances
from tests.openstack.conftest import API, cli_hosts, cli_instances, cli_time, lease_body

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"  # what blazarclient parses (utils.LEASE_DATE_FORMAT)
BAD_DATE = "{} is an invalid date. Required format: %Y-%m-%d %H:%M"  # Blazar's InvalidDate


def error(response) -> str:
    body = response.json()
    assert set(body) == {"error_code", "error_message", "error_name"}
    assert body["error_code"] == response.status_code
    return body["error_message"]


def utc(text: str) -> datetime:
    return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=at(0).tzinfo)


@pytest.fixture
def alice(lease_user):
    return lease_user("alice-bz")


@pytest.fixture
def as_alice(blazar_for, alice):
    return blazar_for(alice)


@pytest.fixture
def created(as_alice, reservable_hosts):
    """A lease of two instances made through Blazar's API: its id and body."""
    reservable_hosts(2)
    response = as_alice.post(
        f"{API}/leases", lease_body("bz-1", at(9), at(12), cli_instances(2)), format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()["lease"]


@pytest.mark.parametrize("header", [None, "bogus-token", "a" * 40])
def test_without_a_valid_token_every_request_is_a_401_in_blazars_shape(client, db, header):
    extra = {"HTTP_X_AUTH_TOKEN": header} if header else {}

    response = client.get(f"{API}/leases", **extra)

    assert response.status_code == 401
    assert response.json()["error_name"] == "UNAUTHORIZED"
    assert response["WWW-Authenticate"] == 'Keystone uri="http://testserver/identity/v3"'


def test_a_lease_created_as_the_client_sends_it_reads_back_in_blazars_format(created, alice):
    lease = Lease.objects.get(uuid=created["id"])

    assert lease.owner == alice
    assert created["name"] == "bz-1"
    assert utc(created["start_date"]) == at(9)
    assert utc(created["end_date"]) == at(12)
    assert created["status"] == "PENDING"
    (reservation,) = created["reservations"]
    assert reservation["resource_type"] == "virtual:instance"
    assert (reservation["vcpus"], reservation["memory_mb"], reservation["amount"]) == (1, 1024, 2)
    assert reservation["disk_gb"] == 0
    assert reservation["affinity"] is None
    assert reservation["lease_id"] == created["id"]
    assert {e["event_type"] for e in created["events"]} == {
        "start_lease",
        "before_end_lease",
        "end_lease",
    }


@pytest.mark.parametrize("word, stored", [("True", True), ("False", False), ("None", None)])
def test_affinity_arrives_as_a_word_and_means_it(as_alice, reservable_hosts, word, stored):
    reservable_hosts(2)
    body = lease_body("aff", at(9), at(12), cli_instances(1, affinity=word))

    response = as_alice.post(f"{API}/leases", body, format="json")

    assert response.status_code == 201
    assert response.json()["lease"]["reservations"][0]["affinity"] is stored
    assert Lease.objects.get(name="aff").reservations.get().affinity is stored


@pytest.mark.parametrize("word, grouped", [("True", True), ("False", True), ("None", False)])
def test_an_instance_reservation_names_its_flavor_and_server_group_as_blazar_does(
    as_alice, reservable_hosts, word, grouped
):
    reservable_hosts(2)
    body = lease_body("sg", at(9), at(10), cli_instances(1, affinity=word))

    (shown,) = as_alice.post(f"{API}/leases", body, format="json").json()["lease"]["reservations"]

    reservation = Lease.objects.get(name="sg").reservations.get()
    group = uuid.uuid5(uuid.NAMESPACE_URL, f"corral:reservation:{reservation.pk}")
    assert shown["flavor_id"] == str(reservation.pk)
    assert shown["server_group_id"] == (str(group) if grouped else None)
    assert reservation_group_id(reservation) == shown["server_group_id"]


def test_a_host_reservation_with_empty_properties_and_now_starts_at_once(
    as_alice, reservable_hosts
):
    reservable_hosts(2)
    body = lease_body("hosts", "now", timezone.now() + timedelta(hours=3), cli_hosts(1, 2))

    response = as_alice.post(f"{API}/leases", body, format="json")

    assert response.status_code == 201
    (reservation,) = response.json()["lease"]["reservations"]
    assert (reservation["min"], reservation["max"]) == (1, 2)
    assert reservation["hypervisor_properties"] == ""
    assert reservation["resource_properties"] == ""
    assert Lease.objects.get(name="hosts").reservations.get().allocations.count() == 2


def test_a_lease_reserving_nothing_is_created_with_its_window_events_and_status(as_alice):
    response = as_alice.post(f"{API}/leases", lease_body("empty", at(9), at(10)), format="json")

    assert response.status_code == 201
    lease = response.json()["lease"]
    assert lease["reservations"] == []
    assert (utc(lease["start_date"]), utc(lease["end_date"])) == (at(9), at(10))
    assert lease["status"] == "PENDING"
    assert sorted(event["event_type"] for event in lease["events"]) == [
        "before_end_lease",
        "end_lease",
        "start_lease",
    ]


def test_a_lease_without_a_reservations_key_is_created_reserving_nothing_as_in_blazar(
    as_alice,
):
    body = lease_body("bare", at(9), at(10))
    del body["reservations"]  # Blazar's manager takes a missing key for no reservations

    response = as_alice.post(f"{API}/leases", body, format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["lease"]["reservations"] == []
    assert Lease.objects.get(name="bare").reservations.count() == 0


def test_a_blazar_lease_deletes_its_servers_when_it_ends_as_blazar_does(
    as_alice, reservable_hosts, make_vm
):
    reservable_hosts(1)
    body = lease_body("ends", at(9), at(10), cli_instances(1, memory_mb=512))
    created = as_alice.post(f"{API}/leases", body, format="json")
    lease = Lease.objects.get(uuid=uuid.UUID(created.json()["lease"]["id"]))
    vm = make_vm(reservation=lease.reservations.get(), status="up")

    lifecycle.end_lease(lease)

    assert lease.end_action == "delete"
    assert list(Job.objects.filter(vm=vm).order_by("pk").values_list("kind", flat=True)) == [
        "poweroff",
        "delete",
    ]


def test_a_lease_through_corrals_own_api_keeps_its_end_action(client_for, alice, reservable_hosts):
    reservable_hosts(1)
    body = {
        "name": "own",
        "start": at(9).isoformat(),
        "end": at(10).isoformat(),
        "reservations": [instances(1, memory_mb=512)],
    }

    created = client_for(alice).post("/api/leases/", body, format="json")

    assert created.status_code == 201, created.content
    assert Lease.objects.get(name="own").end_action == "stop"


@pytest.mark.parametrize(
    "reservation",
    [
        cli_hosts(1, 1, hypervisor_properties="[]", resource_properties="[]"),
        cli_hosts(1, 1, hypervisor_properties="", resource_properties="[]"),
        cli_instances(1, resource_properties="[]"),
    ],
    ids=["hosts", "hosts-mixed", "instances"],
)
def test_empty_property_expressions_are_no_constraint(as_alice, reservable_hosts, reservation):
    reservable_hosts(1, capabilities={"gpu": "a100"})

    response = as_alice.post(
        f"{API}/leases", lease_body("any", at(9), at(10), reservation), format="json"
    )

    assert response.status_code == 201
    (shown,) = response.json()["lease"]["reservations"]
    assert shown["resource_properties"] == ""
    assert Lease.objects.get(name="any").reservations.get().host_properties == {}


def test_properties_come_back_as_expressions_that_read_back_the_same(as_alice, reservable_hosts):
    reservable_hosts(1, capabilities={"gpu": "a100"})
    wanted = cli_hosts(
        1,
        1,
        hypervisor_properties='[">=", "$vcpus", "8"]',
        resource_properties='["==", "$gpu", "a100"]',
    )

    response = as_alice.post(f"{API}/leases", lease_body("p", at(9), at(10), wanted), format="json")

    (reservation,) = response.json()["lease"]["reservations"]
    assert reservation["hypervisor_properties"] == '[">=", "$vcpus", "8"]'
    assert reservation["resource_properties"] == '["==", "$gpu", "a100"]'
    assert Lease.objects.get(name="p").reservations.get().host_properties == {
        "cpus": 8,
        "gpu": "a100",
    }


@pytest.mark.parametrize(
    "change, field",
    [
        ({"network_id": "n1"}, "network_id"),
        ({"before_end": "snapshot"}, "before_end"),
        ({"min": 1}, "min"),
    ],
)
def test_a_reservation_field_corral_does_not_apply_is_a_400_naming_it(
    as_alice, reservable_hosts, change, field
):
    reservable_hosts(1)
    body = lease_body("bad", at(9), at(10), cli_instances(1, **change))

    response = as_alice.post(f"{API}/leases", body, format="json")

    assert response.status_code == 400
    assert error(response).startswith(f"reservations.0.{field}: ")
    assert not Lease.objects.filter(name="bad").exists()


def test_custom_events_are_refused_not_ignored(as_alice, reservable_hosts):
    reservable_hosts(1)
    body = lease_body("ev", at(9), at(10), cli_instances(1))
    body["events"] = [{"event_type": "notification", "event_date": cli_time(at(9.5))}]

    response = as_alice.post(f"{API}/leases", body, format="json")

    assert response.status_code == 400
    assert error(response) == (
        "events: Custom events are not supported; Corral schedules the start, the warning "
        "before the end and the end itself."
    )
    assert not Lease.objects.filter(name="ev").exists()


def _without(body: dict, *names) -> dict:
    return {key: value for key, value in body.items() if key not in names}


NOW = timezone.now


@pytest.mark.parametrize(
    "spoil, status, message",
    [
        (lambda b: _without(b, "name"), 400, "Missing parameter name"),
        (lambda b: _without(b, "start_date"), 400, "Missing parameter start_date"),
        (
            lambda b: _without(b, "name", "end_date"),
            400,
            "Missing parameter name, end_date",
        ),
        (
            lambda b: b | {"reservations": [{"min": 1, "max": 1}]},
            400,
            "Missing parameter resource_type",
        ),
        (lambda b: b | {"start_date": "tomorrow"}, 400, BAD_DATE.format("tomorrow")),
        (lambda b: b | {"end_date": "2030-01-01T10:00"}, 400, BAD_DATE.format("2030-01-01T10:00")),
        (
            lambda b: b | {"start_date": cli_time(NOW() - timedelta(hours=1))},
            400,
            "Start date must be later than current date",
        ),
        (
            lambda b: b | {"start_date": cli_time(at(10)), "end_date": cli_time(at(9))},
            400,
            "End date must be later than start date.",
        ),
        (
            lambda b: b | {"start_date": cli_time(at(9)), "end_date": cli_time(at(9))},
            400,
            "End date must be later than start date.",
        ),
        (lambda b: b | {"before_end_date": "soon"}, 400, BAD_DATE.format("soon")),
        (
            lambda b: b | {"before_end_date": cli_time(at(10))},
            403,
            "Datetime is out of lease limits",
        ),
        (
            lambda b: b | {"reservations": [cli_hosts(2, 1)]},
            400,
            "Invalid values for min/max of hosts. Max must be equal to or larger than min.",
        ),
        (
            lambda b: b | {"reservations": [cli_hosts(0, 1)]},
            400,
            "Malformed parameter min and max (must be greater than or equal to 1)",
        ),
        (lambda b: b | {"reservations": [cli_hosts("x", 1)]}, 400, "Malformed parameter min"),
        (
            lambda b: b | {"reservations": [cli_hosts(1, 1, resource_properties="[oops")]},
            400,
            "Malformed requirements [oops",
        ),
    ],
    ids=[
        "no name",
        "no start",
        "no name nor end",
        "no resource type",
        "bad start",
        "iso end",
        "start in the past",
        "end before start",
        "end at start",
        "bad before end",
        "before end at the end",
        "max below min",
        "zero min",
        "min not a number",
        "properties not json",
    ],
)
def test_a_bad_lease_is_refused_with_blazars_code_and_message(
    as_alice, reservable_hosts, spoil, status, message
):
    reservable_hosts(1)
    body = spoil(lease_body("bad", at(9), at(10), cli_instances(1)))

    response = as_alice.post(f"{API}/leases", body, format="json")

    assert response.status_code == status
    assert error(response) == message
    assert not Lease.objects.exists()


def test_a_lease_that_does_not_fit_is_a_409_saying_what_is_short(as_alice, reservable_hosts):
    reservable_hosts(1)
    body = lease_body("big", at(9), at(10), cli_instances(5))

    response = as_alice.post(f"{API}/leases", body, format="json")

    assert response.status_code == 409
    assert error(response) == (
        f"The lease does not fit: only 3 of 5 instances fit between {at(9):%Y-%m-%d %H:%M} "
        f"and {at(10):%Y-%m-%d %H:%M} (5 instances of 1024 MiB need 5120 MiB free; 3072 are "
        f"free). No 1-hour window that starts in the 30 days after {at(9):%Y-%m-%d %H:%M} (UTC) "
        "fits."
    )


def test_creating_needs_the_lease_user_role(blazar_for, make_user, reservable_hosts):
    reservable_hosts(1)
    body = lease_body("nope", at(9), at(10), cli_instances(1))

    response = blazar_for(make_user()).post(f"{API}/leases", body, format="json")

    assert response.status_code == 403
    assert error(response) == "Policy doesn't allow blazar:leases:post to be performed"


def test_the_list_holds_only_the_callers_leases(as_alice, created, make_lease, lease_user):
    make_lease(at(13), at(14), instances(1), owner=lease_user(), name="someone-elses")

    response = as_alice.get(f"{API}/leases")

    assert response.status_code == 200
    assert [lease["id"] for lease in response.json()["leases"]] == [created["id"]]


def test_listing_costs_the_same_queries_for_many_leases(
    as_alice, alice, make_lease, reservable_hosts, django_assert_max_num_queries
):
    reservable_hosts(3)
    for hour in range(8):
        make_lease(at(hour), at(hour + 1), instances(1), instances(1), owner=alice)

    with django_assert_max_num_queries(8):
        response = as_alice.get(f"{API}/leases")

    assert len(response.json()["leases"]) == 8


def test_show_by_uuid_and_trailing_slash_alike(as_alice, created):
    plain = as_alice.get(f"{API}/leases/{created['id']}")
    slashed = as_alice.get(f"{API}/leases/{created['id']}/")

    assert plain.status_code == slashed.status_code == 200
    assert plain.json() == slashed.json() == {"lease": created}


@pytest.mark.parametrize("ident", ["bz-1", "42", "00000000-0000-0000-0000-000000000000"])
def test_anything_but_a_known_uuid_is_not_found(as_alice, created, ident):
    response = as_alice.get(f"{API}/leases/{ident}")

    assert response.status_code == 404
    assert error(response) == f"Lease {ident} not found."


def test_another_users_lease_is_not_found_for_every_method(blazar_for, lease_user, created):
    stranger = blazar_for(lease_user())
    url = f"{API}/leases/{created['id']}"

    responses = [
        stranger.get(url),
        stranger.put(url, {"name": "mine"}, format="json"),
        stranger.delete(url),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404]
    assert all("not found" in error(r) for r in responses)
    assert Lease.objects.get(uuid=created["id"]).name == "bz-1"


def test_a_viewer_who_may_not_change_gets_a_403(blazar_for, make_user, grant, created):
    role = Role.objects.create(name="LeaseViewer")
    role.actions.set(Permission.objects.filter(codename="view_lease"))
    ensure_grant_permissions(role)
    reader = make_user()
    grant(reader, "LeaseViewer", Lease.objects.get(uuid=created["id"]))
    url = f"{API}/leases/{created['id']}"

    response = blazar_for(reader).put(url, {"name": "x"}, format="json")
    removal = blazar_for(reader).delete(url)

    assert (response.status_code, removal.status_code) == (403, 403)
    assert error(response) == "Policy doesn't allow blazar:leases:put to be performed"
    assert error(removal) == "Policy doesn't allow blazar:leases:delete to be performed"
    assert blazar_for(reader).get(url).status_code == 200
    assert Lease.objects.get(uuid=created["id"]).name == "bz-1"


def test_set_end_date_as_the_client_sends_it(as_alice, created):
    url = f"{API}/leases/{created['id']}"

    response = as_alice.put(url, {"end_date": cli_time(at(13))}, format="json")

    assert response.status_code == 200
    assert utc(response.json()["lease"]["end_date"]) == at(13)
    assert Lease.objects.get(uuid=created["id"]).end_date == at(13)


@pytest.mark.parametrize(
    "change, start, end",
    [
        ({"prolong_for": "2h"}, 9, 14),
        ({"reduce_by": "30m"}, 9, 11.5),
        ({"defer_by": "1h"}, 10, 12),
        ({"advance_by": "1d"}, 9 - 24, 12),
        ({"prolong_for": "1d", "defer_by": "1h"}, 10, 12 + 24),
    ],
)
def test_dates_move_by_durations(as_alice, created, change, start, end):
    response = as_alice.put(f"{API}/leases/{created['id']}", change, format="json")

    assert response.status_code == 200, response.json()
    lease = Lease.objects.get(uuid=created["id"])
    assert (lease.start_date, lease.end_date) == (
        at(0) + timedelta(hours=start),
        at(0) + timedelta(hours=end),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"prolong_for": "2 hours"}, 'prolong_for: A duration such as "30m", "12h" or "2d".'),
        (
            {"prolong_for": "1h", "end_date": "2030-01-01 10:00"},
            "prolong_for: Give one of end_date and prolong_for, not both.",
        ),
        ({"reduce_by": "3h"}, "end_date: The lease must end after it starts."),
        ({"unknown": 1}, "unknown: Unknown field; Corral does not apply it."),
        ({"advance_by": "999999d"}, "start_date: That moves the date out of range."),
        ({"end_date": "2030-01-01T10:00"}, BAD_DATE.format("2030-01-01T10:00")),
        ({"end_date": cli_time(at(8))}, "End date must be later than current and start date"),
        ({"start_date": "2020-01-01 10:00"}, "Start date must be later than current date"),
        ({"reservations": [{"amount": 3}]}, "Missing parameter reservation ID"),
        (
            {"reservations": [{"id": "999999", "amount": 3}]},
            "Please enter valid reservation IDs. Invalid reservation IDs are: 999999",
        ),
    ],
)
def test_a_bad_change_is_a_400_and_changes_nothing(as_alice, created, change, message):
    response = as_alice.put(f"{API}/leases/{created['id']}", change, format="json")

    assert response.status_code == 400
    assert error(response) == message
    lease = Lease.objects.get(uuid=created["id"])
    assert (lease.start_date, lease.end_date) == (at(9), at(12))


def test_a_before_end_date_outside_the_lease_is_blazars_403(as_alice, created):
    url = f"{API}/leases/{created['id']}"

    response = as_alice.put(url, {"before_end_date": cli_time(at(12))}, format="json")

    assert response.status_code == 403
    assert error(response) == "Datetime is out of lease limits"
    assert Lease.objects.get(uuid=created["id"]).before_end_date == utc(created["before_end_date"])


def test_an_empty_change_answers_the_lease_unchanged(as_alice, created):
    response = as_alice.put(f"{API}/leases/{created['id']}", {}, format="json")

    assert response.status_code == 200
    assert response.json()["lease"] == created


def test_an_ended_lease_takes_no_new_dates(as_alice, make_lease, alice, reservable_hosts):
    reservable_hosts(1)
    lease = make_lease(at(-50), at(-49), instances(1), owner=alice)  # ended, whatever the hour
    url = f"{API}/leases/{lease.uuid}"

    refused = as_alice.put(url, {"name": "renamed", "end_date": cli_time(at(13))}, format="json")

    assert refused.status_code == 400
    assert error(refused) == ("Terminated leases can only be renamed")
    assert Lease.objects.get(pk=lease.pk).end_date == at(-49)


def test_a_started_lease_keeps_its_start(as_alice, make_lease, alice, reservable_hosts):
    reservable_hosts(1)
    lease = make_lease(at(-48), at(13), instances(1), owner=alice)

    response = as_alice.put(
        f"{API}/leases/{lease.uuid}", {"start_date": cli_time(at(-47))}, format="json"
    )

    assert response.status_code == 400
    assert error(response) == "Cannot modify the start date of already started leases"
    assert Lease.objects.get(pk=lease.pk).start_date == at(-48)


def test_before_end_date_changes_when_set(as_alice, created):
    response = as_alice.put(
        f"{API}/leases/{created['id']}", {"before_end_date": cli_time(at(10))}, format="json"
    )

    assert response.status_code == 200
    assert utc(response.json()["lease"]["before_end_date"]) == at(10)
    lease = Lease.objects.get(uuid=created["id"])
    assert lease.events.get(event_type="before_end_lease").time == at(10)


def test_an_instance_reservation_grows_and_resizes(as_alice, created):
    reservation = created["reservations"][0]["id"]
    change = {"reservations": [{"id": int(reservation), "amount": 3, "vcpus": 2}]}

    response = as_alice.put(f"{API}/leases/{created['id']}", change, format="json")

    assert response.status_code == 200, response.json()
    shown = response.json()["lease"]["reservations"][0]
    assert (shown["amount"], shown["vcpus"]) == (3, 2)
    stored = Lease.objects.get(uuid=created["id"]).reservations.get()
    assert sum(a.slots for a in stored.allocations.all()) == 3


def test_min_and_max_of_a_host_reservation_change(as_alice, reservable_hosts):
    reservable_hosts(3)
    made = as_alice.post(
        f"{API}/leases", lease_body("h", at(9), at(10), cli_hosts(1, 1)), format="json"
    ).json()["lease"]
    reservation = made["reservations"][0]["id"]

    response = as_alice.put(
        f"{API}/leases/{made['id']}",
        {"reservations": [{"id": reservation, "min": 2, "max": 3}]},
        format="json",
    )

    assert response.status_code == 200, response.json()
    shown = response.json()["lease"]["reservations"][0]
    assert (shown["min"], shown["max"]) == (2, 3)
    assert Lease.objects.get(uuid=made["id"]).reservations.get().allocations.count() == 3


def test_a_change_that_does_not_fit_leaves_the_lease_as_it_was(as_alice, created):
    reservation = created["reservations"][0]["id"]
    before = as_alice.get(f"{API}/leases/{created['id']}").json()

    response = as_alice.put(
        f"{API}/leases/{created['id']}",
        {"name": "renamed", "reservations": [{"id": reservation, "amount": 7}]},
        format="json",
    )

    assert response.status_code == 409
    assert error(response) == (
        f"The change does not fit: only 6 of 7 instances fit between {at(9):%Y-%m-%d %H:%M} and "
        f"{at(12):%Y-%m-%d %H:%M} (7 instances of 1024 MiB need 7168 MiB free; 6144 are free)."
    )
    assert as_alice.get(f"{API}/leases/{created['id']}").json() == before


def test_a_reservation_can_be_added_to_a_lease(as_alice, created):
    response = as_alice.put(
        f"{API}/leases/{created['id']}",
        {"reservations": [cli_instances(1, vcpus=2)]},
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert [r["vcpus"] for r in response.json()["lease"]["reservations"]] == [1, 2]


def test_delete_removes_the_lease(as_alice, created):
    response = as_alice.delete(f"{API}/leases/{created['id']}")

    assert response.status_code == 204
    assert not Lease.objects.filter(uuid=created["id"]).exists()
    assert as_alice.get(f"{API}/leases/{created['id']}").status_code == 404


def test_deleting_an_active_lease_ends_it_first(as_alice, reservable_hosts):
    reservable_hosts(1)
    made = as_alice.post(
        f"{API}/leases",
        lease_body("now", "now", timezone.now() + timedelta(hours=2), cli_instances(1)),
        format="json",
    ).json()["lease"]
    Lease.objects.filter(uuid=made["id"]).update(status=LeaseStatus.ACTIVE)

    assert as_alice.delete(f"{API}/leases/{made['id']}").status_code == 204
    assert not Lease.objects.filter(uuid=made["id"]).exists()


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("get", "/reservation/v1/floatingips", 404),
        ("get", "/reservation/v1/nothing/here/", 404),
        ("post", "/reservation/v1/leases/x/y", 404),
        ("patch", "/reservation/v1/leases", 405),
    ],
)
def test_other_urls_and_methods_answer_in_blazars_shape(as_alice, method, path, status):
    response = getattr(as_alice, method)(path, {}, format="json")

    assert response.status_code == status
    assert error(response)


def test_a_body_that_is_not_an_object_is_a_400(as_alice, created):
    response = as_alice.put(f"{API}/leases/{created['id']}", [1, 2], format="json")

    assert response.status_code == 400
    assert error(response) == "The request body must be a JSON object."


def test_the_versions_document_needs_no_token(client, db):
    response = client.get("/reservation")

    assert response.status_code == 300
    assert response.json()["versions"][0]["links"][0]["href"] == (
        "http://testserver/reservation/v1"
    )
