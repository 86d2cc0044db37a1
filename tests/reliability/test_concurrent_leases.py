"""A hundred users ask for leases at the same moment, through a real web server, for the
reservable capacity of three simulated hosts (60 instance slots), while a real task cluster
syncs the hosts and starts the leases that begin now.

Windows overlap and differ in length; some leases begin now, some hold two reservations, some
ask for instances on one host or on distinct hosts. At no instant do the accepted leases hold
more than a host has or more than the 60 slots (a sweep over every start and end in the
database); each refusal is a 409 saying what did not fit and leaves nothing behind (no
lease, reservation, allocation, lease event, grant or feed event); and the capacity the
planner still offers is exactly what the accepted leases leave free.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest
import requests
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone
from guardian.models import UserObjectPermission

from hosts.models import Host, HostStatus
from leases.models import (
    LIVE_LEASES,
    Allocation,
    EventType,
    Lease,
    LeaseEvent,
    LeaseStatus,
    Reservation,
    ReservationStatus,
)
from project.models import Event
from tests.conftest import wait_until
from tests.leases.test_concurrent_leases import _lease_users, _peaks
from tests.reliability.conftest import token_for
from tests.reliability.crowd import POSTGRES_ONLY, not_json, post_all, scaled

pytestmark = [pytest.mark.slow, pytest.mark.postgres, POSTGRES_ONLY]

HOST_MEMORY_MB = 3072  # what libvirt's test driver reports for each simulated host
SLOTS_PER_HOST = scaled(20)
SIZE = {"vcpus": 2, "memory_mb": HOST_MEMORY_MB // SLOTS_PER_HOST}  # memory binds: 20 x 153
REQUESTS = scaled(100)
SETTLE_S = 60
CLUSTER_ENV = {"Q_WORKERS": "2", "CORRAL_JOB_HEARTBEAT_TIMEOUT": "60"}
TIME = "%Y-%m-%d %H:%M"


def _instances(amount: int, affinity) -> dict:
    """A virtual:instance reservation as a Blazar client sends it."""
    return {
        "resource_type": "virtual:instance",
        "amount": amount,
        "vcpus": SIZE["vcpus"],
        "memory_mb": SIZE["memory_mb"],
        "disk_gb": 1,
        "affinity": affinity,
        "resource_properties": "",
    }


def _bodies(count: int, base: datetime, seed: int = 5) -> list[dict]:
    """Blazar request bodies: windows within six hours of ``base`` (some starting now), one
    to six hours long; one reservation of 1-6 instances (any host, one host, or 1-3 on
    distinct hosts), or now and then two reservations of 1-4."""
    chance = random.Random(seed)
    bodies = []
    for i in range(count):
        offset = chance.randrange(0, 24) * timedelta(minutes=15)
        length = chance.randrange(4, 25) * timedelta(minutes=15)
        starts_now = chance.random() < 0.15
        if chance.random() < 0.15:
            reservations = [_instances(chance.randint(1, 4), None) for _ in range(2)]
        else:
            affinity = chance.choice([None, None, True, False])
            most = 3 if affinity is False else 6
            reservations = [_instances(chance.randint(1, most), affinity)]
        bodies.append(
            {
                "name": f"crowd-{i}",
                "start_date": "now" if starts_now else f"{base + offset:{TIME}}",
                "end_date": f"{base + offset + length:{TIME}}",
                "reservations": reservations,
                "events": [],
            }
        )
    return bodies


def _peak_slots(spans: list[tuple[datetime, datetime, int]]) -> int:
    """Most slots in use at once over (start, end, slots) spans: a sweep over the instants
    where use changes, ends before starts at the same instant (back to back adds nothing)."""
    changes = sorted(
        [(start, 1, slots) for start, _, slots in spans]
        + [(end, 0, slots) for _, end, slots in spans]
    )
    used = most = 0
    for _, begins, slots in changes:
        used += slots if begins else -slots
        most = max(most, used)
    return most


def _spans_by_host(within: tuple[datetime, datetime] | None = None) -> dict[int, list]:
    """Host id -> (start, end, slots) of every live allocation (cut to ``within``)."""
    spans = defaultdict(list)
    rows = Allocation.objects.filter(reservation__lease__status__in=LIVE_LEASES).values_list(
        "host_id", "reservation__lease__start_date", "reservation__lease__end_date", "slots"
    )
    for host_id, start, end, slots in rows:
        if within is not None:
            if start >= within[1] or end <= within[0]:
                continue
            start, end = max(start, within[0]), min(end, within[1])
        spans[host_id].append((start, end, slots))
    return spans


def _leftovers(accepted: set[int]) -> dict[str, list]:
    """What is stored for leases that were not accepted (all empty when nothing is)."""
    lease_type = ContentType.objects.get_for_model(Lease)
    grants = UserObjectPermission.objects.filter(content_type=lease_type).values_list(
        "object_pk", flat=True
    )
    return {
        "leases": list(Lease.objects.exclude(pk__in=accepted).values_list("name", flat=True)),
        "reservations": list(
            Reservation.objects.exclude(lease_id__in=accepted).values_list("pk", flat=True)
        ),
        "allocations": list(
            Allocation.objects.exclude(reservation__lease_id__in=accepted).values_list(
                "pk", flat=True
            )
        ),
        "lease events": list(
            LeaseEvent.objects.exclude(lease_id__in=accepted).values_list("pk", flat=True)
        ),
        "grants": [pk for pk in grants if int(pk) not in accepted],
        "feed events": list(
            Event.objects.filter(object_type="lease")
            .exclude(object_id__in=accepted)
            .values_list("message", flat=True)
        ),
    }


def test_a_hundred_leases_at_once_never_promise_more_than_the_reservable_capacity(
    sim_hosts, task_cluster, web_server
):
    Host.objects.filter(pk__in=[h.pk for h in sim_hosts]).update(reservable=True)
    assert {(h.cpus, h.memory_mb) for h in sim_hosts} == {(16, HOST_MEMORY_MB)}
    users = _lease_users(REQUESTS)
    now = timezone.now().astimezone(UTC)
    base = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
    bodies = _bodies(REQUESTS, base)
    workers = task_cluster(**CLUSTER_ENV)
    server = web_server()

    answers = post_all(
        server.url, [(u, "/api/leases/", b) for u, b in zip(users, bodies, strict=True)]
    )

    assert not_json(answers) == []
    statuses = Counter(a.status for a in answers)
    assert set(statuses) == {201, 409}, [(a.status, a.body) for a in answers if a.status >= 400]
    accepted = {
        a.body["id"]: body for a, body in zip(answers, bodies, strict=True) if a.status == 201
    }
    refused = [(a.body, body) for a, body in zip(answers, bodies, strict=True) if a.status == 409]
    for answer, body in refused:
        detail = answer["detail"]
        assert detail.startswith("The lease does not fit: "), detail
        assert re.search(r" instances? fit ", detail), detail
        if len(body["reservations"]) > 1:
            assert "reservation " in detail, detail

    # Accepted: stored as answered, each holding exactly what it asked for.
    assert set(Lease.objects.values_list("pk", flat=True)) == set(accepted)
    for answer in (a for a in answers if a.status == 201):
        body = accepted[answer.body["id"]]
        assert answer.body["name"] == body["name"]
        assert answer.body["owner"] == answer.user.username
        assert len(answer.body["reservations"]) == len(body["reservations"])
        for held, asked in zip(answer.body["reservations"], body["reservations"], strict=True):
            slots = {a["host"]: a["slots"] for a in held["allocations"]}
            assert sum(slots.values()) == asked["amount"]
            if asked["affinity"] is True:
                assert len(slots) == 1
            if asked["affinity"] is False:
                assert set(slots.values()) == {1}
            stored = dict(
                Allocation.objects.filter(reservation_id=held["id"]).values_list("host", "slots")
            )
            assert stored == slots
        events = LeaseEvent.objects.filter(lease_id=answer.body["id"])
        assert sorted(events.values_list("event_type", flat=True)) == sorted(EventType.values)

    # Refused: nothing of them is stored anywhere.
    assert _leftovers(set(accepted)) == {
        "leases": [],
        "reservations": [],
        "allocations": [],
        "lease events": [],
        "grants": [],
        "feed events": [],
    }

    # No instant where a host, or the whole free pool, is promised more than it has.
    capacity = {h.pk: (h.cpus * h.cluster.cpu_overcommit_ratio, h.memory_mb) for h in sim_hosts}
    for host_id, (vcpus, memory) in _peaks().items():
        assert vcpus <= capacity[host_id][0] and memory <= capacity[host_id][1], host_id
    spans = _spans_by_host()
    assert max(_peak_slots(s) for s in spans.values()) <= SLOTS_PER_HOST
    busiest = _peak_slots([span for host_spans in spans.values() for span in host_spans])
    assert 0 < busiest <= 3 * SLOTS_PER_HOST

    # The planner offers exactly what the accepted leases leave free, window after window.
    asker = token_for(users[0])
    for hours in range(0, 12, 2):
        window = (base + timedelta(hours=hours), base + timedelta(hours=hours + 2))
        within = _spans_by_host(window)
        free = sum(SLOTS_PER_HOST - _peak_slots(within.get(h.pk, [])) for h in sim_hosts)
        fits = [
            requests.post(
                f"{server.url}/api/leases/check/",
                json={
                    "name": "probe",
                    "start_date": f"{window[0]:{TIME}}",
                    "end_date": f"{window[1]:{TIME}}",
                    "reservations": [_instances(amount, None)],
                },
                headers=asker,
                timeout=60,
            ).json()["fits"]
            for amount in (free, free + 1)
            if amount > 0
        ]
        assert fits == ([True, False] if free else [False]), (window, free)

    # The task cluster starts the accepted leases that begin now; the others wait.
    starting_now = {pk for pk, body in accepted.items() if body["start_date"] == "now"}
    wait_until(
        lambda: (
            set(
                Lease.objects.filter(pk__in=starting_now, status=LeaseStatus.ACTIVE).values_list(
                    "pk", flat=True
                )
            )
            == starting_now
        ),
        timeout=SETTLE_S,
        message=lambda: f"leases not started: {workers.log()[-3000:]}",
    )
    later = Lease.objects.filter(pk__in=set(accepted) - starting_now)
    assert set(later.values_list("status", flat=True)) <= {LeaseStatus.PENDING}
    assert set(
        Reservation.objects.filter(lease_id__in=starting_now).values_list("status", flat=True)
    ) <= {ReservationStatus.ACTIVE}
    assert set(Host.objects.filter(pk__in=capacity).values_list("status", flat=True)) == {
        HostStatus.UP
    }
    assert workers.process.poll() is None and server.running()
