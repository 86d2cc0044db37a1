"""A hundred users asking for leases at the same moment (PostgreSQL: the reservable hosts' rows
are locked while a lease is planned): every request is answered, and no host is promised more
than it has at any instant."""

import random
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import close_old_connections, connection, transaction
from rest_framework.test import APIClient

from hosts.models import Host
from leases.models import LIVE_LEASES, Allocation, Lease
from project.access.grants import grant_role, scope_object
from project.models import Role
from tests.conftest import lock_waiters, unique, wait_until
from tests.leases.fixtures import at, instances

User = get_user_model()
HOSTS, REQUESTS, THREADS = 20, 100, 20
SIZE = {"vcpus": 4, "memory_mb": 1024}  # three per host: memory binds (3072 MiB), not vCPUs


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent leases need PostgreSQL's row locks; SQLite has one writer")


def _lease_users(count: int) -> list:
    """``count`` users holding LeaseUser through one group."""
    group = Group.objects.create(name=unique("lease-users"))
    users = User.objects.bulk_create(User(username=unique("leaser")) for _ in range(count))
    group.user_set.add(*users)
    grant_role(Role.objects.get(name="LeaseUser"), scope_object("system", None), group=group)
    return list(User.objects.filter(groups=group).order_by("pk"))


def _random_bodies(count: int, seed: int = 7) -> list[dict]:
    """Requests for 1-3 instances each, in windows of 1-6 hours that start within a 6-hour
    span, so most of them overlap several others."""
    chance = random.Random(seed)
    bodies = []
    for i in range(count):
        start = chance.randrange(0, 6 * 4) / 4
        length = chance.randrange(4, 6 * 4 + 1) / 4
        bodies.append(
            {
                "name": f"race-{i}",
                "start": f"{at(start):%Y-%m-%d %H:%M}",
                "end": f"{at(start + length):%Y-%m-%d %H:%M}",
                "reservations": [instances(chance.randint(1, 3), **SIZE)],
            }
        )
    return bodies


def _post_all(users: list, bodies: list[dict]) -> list[tuple[int, dict]]:
    def post(user, body) -> tuple[int, dict]:
        close_old_connections()
        try:
            client = APIClient()
            client.force_authenticate(user)
            response = client.post("/api/leases/", body, format="json")
            return response.status_code, response.json()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=THREADS) as workers:
        return list(workers.map(post, users, bodies))


def _peaks() -> dict[int, tuple[int, int]]:
    """Host id -> the most vCPUs and memory the accepted leases hold there at any instant,
    by a sweep over the instants where some allocation begins or ends."""
    changes = defaultdict(list)
    for allocation in Allocation.objects.filter(
        reservation__lease__status__in=LIVE_LEASES
    ).select_related("reservation__lease"):
        reservation, lease = allocation.reservation, allocation.reservation.lease
        use = (reservation.vcpus * allocation.slots, reservation.memory_mb * allocation.slots)
        changes[allocation.host_id].append((lease.start_date, 1, use))
        changes[allocation.host_id].append((lease.end_date, 0, use))  # ends sort first
    peaks = {}
    for host_id, moments in changes.items():
        cpu = memory = most_cpu = most_memory = 0
        for _, begins, (vcpus, mem) in sorted(moments, key=lambda m: (m[0], m[1])):
            sign = 1 if begins else -1
            cpu, memory = cpu + sign * vcpus, memory + sign * mem
            most_cpu, most_memory = max(most_cpu, cpu), max(most_memory, memory)
        peaks[host_id] = (most_cpu, most_memory)
    return peaks


def test_a_hundred_leases_at_once_never_promise_a_host_more_than_it_has(
    postgres_only, reservable_hosts
):
    reservable_hosts(HOSTS)
    users = _lease_users(REQUESTS)
    bodies = _random_bodies(REQUESTS)

    answers = _post_all(users, bodies)

    statuses = Counter(status for status, _ in answers)
    assert set(statuses) <= {201, 409}, answers
    assert sum(statuses.values()) == REQUESTS
    assert statuses[201] > 0 and statuses[409] > 0, statuses
    refused = [body["detail"] for status, body in answers if status == 409]
    assert all(detail.startswith("The lease does not fit: only ") for detail in refused)
    assert Lease.objects.count() == statuses[201]
    accepted = {body["id"] for status, body in answers if status == 201}
    assert set(Lease.objects.values_list("pk", flat=True)) == accepted
    capacity = {
        host.pk: (host.cpus * host.cluster.cpu_overcommit_ratio, host.memory_mb)
        for host in Host.objects.select_related("cluster")
    }
    for host_id, (cpu, memory) in _peaks().items():
        assert cpu <= capacity[host_id][0] and memory <= capacity[host_id][1], host_id


def test_every_accepted_lease_holds_exactly_what_it_asked_for(postgres_only, reservable_hosts):
    reservable_hosts(HOSTS)
    users = _lease_users(REQUESTS)
    bodies = _random_bodies(REQUESTS, seed=11)

    answers = _post_all(users, bodies)

    for status, body in answers:
        if status != 201:
            continue
        [reservation] = body["reservations"]
        assert sum(a["slots"] for a in reservation["allocations"]) == reservation["amount"]


def test_two_requests_of_one_user_at_once_cannot_both_pass_the_quota(
    postgres_only, reservable_hosts, lease_user, settings
):
    settings.LEASE_QUOTA_INSTANCES = 4
    reservable_hosts(2)
    owner = lease_user()
    bodies = [
        {
            "name": f"quota-race-{i}",
            "start": f"{at(9):%Y-%m-%d %H:%M}",
            "end": f"{at(12):%Y-%m-%d %H:%M}",
            "reservations": [instances(3, **SIZE)],
        }
        for i in range(2)
    ]

    # Hold the reservable hosts' rows, so both requests are in flight when the lock opens.
    with ThreadPoolExecutor(max_workers=2) as workers:
        with transaction.atomic():
            list(Host.objects.filter(reservable=True).select_for_update())
            answers = [workers.submit(_post_all, [owner], [body]) for body in bodies]
            wait_until(
                lambda: lock_waiters() == 2,
                timeout=60,
                message=lambda: f"{lock_waiters()} requests wait for the hosts' rows",
            )
        outcomes = sorted((answer.result()[0] for answer in answers), key=lambda a: a[0])

    assert [status for status, _ in outcomes] == [201, 409], outcomes
    assert outcomes[1][1] == {
        "detail": "Your leases would hold 6 instances at once; your quota is 4 instances."
    }
    assert Lease.objects.filter(owner=owner).count() == 1
