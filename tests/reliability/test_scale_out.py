"""Two web processes and two task clusters on one database, as a scaled-out deployment runs:
users take VMs from a pool through both web processes at once and give half of them back.

Every request is answered, no VM goes to two users, no user passes the pool's limit, every
job ends, each VM is what its host says it is, the pool ends at its prestarted level, and no
VM ever has two start jobs at once (the ticker and its prestart monitor run on one cluster at
a time; the per-VM job queue holds across clusters).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from hosts import driver
from hosts.models import STATIONARY_STATUSES, Host, Job, JobKind, JobState, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.sync import status_for
from pools.models import VmPool
from project.access.grants import grant_role
from project.models import Role
from tests.conftest import unique, wait_until
from tests.reliability.conftest import token_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
        reason="two web processes and two task clusters writing at once need PostgreSQL "
        "(row locks, SKIP LOCKED); SQLite has a single writer",
    ),
]

User = get_user_model()
POOL_SIZE = 12
PRESTARTED = 4
USERS = 20
SETTLE_S = 120
CLUSTER_ENV = {
    "Q_WORKERS": "2",
    # Short ticker runs: the ticker changes hands between the clusters often, and stopping a
    # cluster does not wait long for it. The ticker's monitor runs every 2 s besides nudges.
    "CORRAL_TICKER_RUN_SECONDS": "2",
    "VMPOOL_MONITOR_INTERVAL": "2",
    # A loaded 2-core machine must not pass for a dead worker or a stuck scheduler.
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "60",
    "CORRAL_SCHEDULER_LOCK_TIMEOUT": "60",
}


@dataclass
class Answer:
    server: int
    user: User
    status: int
    body: object


def _takers(pool: VmPool, count: int) -> list:
    """``count`` users who may take VMs from the pool (UserRole through one group)."""
    group = Group.objects.create(name=unique("takers"))
    users = User.objects.bulk_create(User(username=unique("taker")) for _ in range(count))
    group.user_set.add(*users)
    grant_role(Role.objects.get(name="UserRole"), pool, group=group)
    return list(User.objects.filter(groups=group).order_by("pk"))


def _post_all(calls: list[tuple[int, str, object]], servers) -> list[Answer]:
    """POST every (server index, path, user) at once, each on its own thread and token."""
    headers = {user.pk: token_for(user) for _, _, user in calls}

    def post(call) -> Answer:
        index, path, user = call
        response = requests.post(
            f"{servers[index].url}{path}", headers=headers[user.pk], timeout=90
        )
        try:
            body = response.json()
        except ValueError:
            body = response.text[:500]
        return Answer(index, user, response.status_code, body)

    with ThreadPoolExecutor(max_workers=len(calls)) as threads:
        return list(threads.map(post, calls))


def _pool_jobs(pool: VmPool):
    return Job.objects.filter(vm__pool=pool)


def _settled(pool: VmPool) -> bool:
    """Nothing left to happen: no job queued or running, every VM in a stationary status,
    and the prestarted level reached (or every free VM up)."""
    if _pool_jobs(pool).filter(state__in=ACTIVE_JOB_STATES).exists():
        return False
    vms = VirtualMachine.objects.filter(pool=pool)
    if vms.exclude(status__in=STATIONARY_STATUSES).exists():
        return False
    free = vms.filter(owner__isnull=True, admin_hold=False).count()
    counts = VmPool.objects.with_counts().get(pk=pool.pk)
    return counts.running_unassigned >= min(pool.prestarted_vms, free)


def _report(pool: VmPool, clusters, servers):
    def text() -> str:
        jobs = _pool_jobs(pool).exclude(state=JobState.SUCCEEDED).order_by("pk")
        lines = [f"{j.pk} {j.kind} {j.state} {j.vm_id} {j.error_message}" for j in jobs]
        statuses = Counter(VirtualMachine.objects.filter(pool=pool).values_list("status", "owner"))
        logs = "\n".join(c.log()[-1500:] for c in clusters)
        web = "\n".join(s.log()[-1000:] for s in servers)
        return f"jobs not succeeded: {lines}\nVMs: {statuses}\n{logs}\n{web}"

    return text


def _wait_settled(pool: VmPool, clusters, servers) -> None:
    wait_until(lambda: _settled(pool), timeout=SETTLE_S, message=_report(pool, clusters, servers))


def _overlapping(intervals: list[tuple]) -> list[tuple]:
    """Pairs of (start, end, job id) intervals that overlap."""
    ordered = sorted(intervals)
    return [(a[2], b[2]) for a, b in pairwise(ordered) if b[0] < a[1]]


def test_two_web_processes_and_two_task_clusters_share_out_a_pool_and_take_it_back(
    real_pool, task_cluster, web_server
):
    pool = real_pool(size=POOL_SIZE, prestarted_vms=PRESTARTED, max_user_vms=1)
    users = _takers(pool, USERS)
    clusters = [task_cluster(**CLUSTER_ENV), task_cluster(**CLUSTER_ENV)]
    servers = [web_server(), web_server()]
    _wait_settled(pool, clusters, servers)
    assert VmPool.objects.with_counts().get(pk=pool.pk).running_unassigned == PRESTARTED

    # Every user asks twice at the same moment, once through each web process.
    taking = _post_all(
        [
            (server, f"/api/vmpools/{pool.pk}/allocatevm/", user)
            for user in users
            for server in (0, 1)
        ],
        servers,
    )

    assert [(a.status, a.body) for a in taking if a.status not in (200, 409)] == []
    given = [a for a in taking if a.status == 200]
    assert 1 <= len(given) <= POOL_SIZE
    assert max(Counter(a.user.pk for a in given).values()) == 1
    assert len({a.body["vm"]["id"] for a in given}) == len(given)
    holders = {a.user.pk for a in given}
    limit = (
        f"You hold 1 VM(s) of {pool.name}, its limit per user; return one before taking another."
    )
    exhausted = f"Pool {pool.name} has no free VM left; try again later."
    refused = [a for a in taking if a.status == 409]
    assert all(a.body["detail"] in (limit, exhausted) for a in refused), refused
    assert all(a.user.pk in holders for a in refused if a.body["detail"] == limit)
    owners = dict(
        VirtualMachine.objects.filter(pool=pool, owner__isnull=False).values_list("pk", "owner")
    )
    assert owners == {a.body["vm"]["id"]: a.user.pk for a in given}
    _wait_settled(pool, clusters, servers)
    held = VirtualMachine.objects.filter(pool=pool, owner__isnull=False)
    assert set(held.values_list("status", flat=True)) == {"up"}

    # Half of the holders give their VM back, through both web processes at once.
    returning = sorted(given, key=lambda a: a.user.pk)[: (len(given) + 1) // 2]
    giving_back = _post_all(
        [
            (i % 2, f"/api/vms/{a.body['vm']['id']}/return/", a.user)
            for i, a in enumerate(returning)
        ],
        servers,
    )

    assert [(a.status, a.body) for a in giving_back if a.status != 202] == []
    assert {tuple(job["kind"] for job in a.body) for a in giving_back} == {("poweroff", "revert")}
    _wait_settled(pool, clusters, servers)

    returned = {a.body["vm"]["id"] for a in returning}
    kept = {a.body["vm"]["id"]: a.user.pk for a in given if a.body["vm"]["id"] not in returned}
    vms = list(VirtualMachine.objects.filter(pool=pool).select_related("host"))
    assert {vm.pk: vm.owner_id for vm in vms if vm.owner_id} == kept
    assert {vm.status for vm in vms if vm.pk in kept} <= {"up"}
    counts = VmPool.objects.with_counts().get(pk=pool.pk)
    assert (counts.total_vms, counts.running_unassigned, counts.starting_vms) == (
        POOL_SIZE,
        PRESTARTED,
        0,
    )

    jobs = list(_pool_jobs(pool).order_by("pk"))
    assert [(j.pk, j.kind, j.state, j.error_message) for j in jobs if j.state != "succeeded"] == []
    by_vm = defaultdict(list)
    for job in jobs:
        by_vm[job.vm_id].append(job)
    starts_at_once = {
        vm_id: _overlapping(
            [(j.created_at, j.finished_at, j.pk) for j in vm_jobs if j.kind == JobKind.START]
        )
        for vm_id, vm_jobs in by_vm.items()
    }
    assert {vm_id: pairs for vm_id, pairs in starts_at_once.items() if pairs} == {}
    runs_at_once = {
        vm_id: _overlapping([(j.started_at, j.finished_at, j.pk) for j in vm_jobs if j.started_at])
        for vm_id, vm_jobs in by_vm.items()
    }
    assert {vm_id: pairs for vm_id, pairs in runs_at_once.items() if pairs} == {}

    hosts = list(Host.objects.filter(cluster=pool.cluster))
    defined_on = defaultdict(list)
    for host in hosts:
        for domain in driver.host_report(host.uri).domains:
            defined_on[domain.uuid].append(host.pk)
    assert {vm.name: defined_on[str(vm.uuid)] for vm in vms} == {
        vm.name: [vm.host_id] for vm in vms
    }
    reported = {
        vm.name: status_for(driver.domain_power_state(vm.host.uri, str(vm.uuid))) for vm in vms
    }
    assert reported == {vm.name: vm.status for vm in vms}

    assert [c.process.poll() for c in clusters] == [None, None]
    assert [s.running() for s in servers] == [True, True]
