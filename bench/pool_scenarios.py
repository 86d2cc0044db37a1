"""VM pool benchmarks: taking a VM through the API, one prestart monitor run over many pools,
and how soon a pool is on its way back to its prestarted level after a burst of allocations.

Each scenario builds pools in clusters of its own and removes them afterwards, so the
scenarios that delete every cluster and template still can.
"""

import statistics
import time
from itertools import count

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import OrmQ
from rest_framework.test import APIClient

from bench.fleet import make_pool, remove_pools
from hosts.models import Cluster, Job, VirtualMachine, VmStatus
from pools import monitor, services, tasks
from pools.models import VmPool
from project.access.grants import grant_role, revoke_role
from project.models import Role
from project.workers import task_path

User = get_user_model()
_serial = count(1)
ALLOCATIONS = 50


def _pool_user(pool: VmPool) -> User:
    user, _ = User.objects.get_or_create(username=f"poolbench-user-{pool.pk}")
    grant_role(Role.objects.get(name="UserRole"), pool, user=user)
    return user


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[18]


def _allocations(pool: VmPool) -> tuple[list[float], int]:
    """Milliseconds of ALLOCATIONS instant allocations through the API (each VM given back
    between two, untimed), and the queries of one."""
    user = _pool_user(pool)
    client = APIClient()
    client.force_authenticate(user)
    role = Role.objects.get(name="UserRole")
    url = f"/api/vmpools/{pool.pk}/allocatevm/"

    def give_back(vm_id: int) -> None:
        vm = VirtualMachine.objects.get(pk=vm_id)
        revoke_role(role, vm, user=user)
        VirtualMachine.objects.filter(pk=vm_id).update(owner=None)

    give_back(client.post(url).json()["vm"]["id"])  # warm caches
    times = []
    queries = 0
    for _ in range(ALLOCATIONS):
        connection.queries_log.clear()  # a full log (9,000 queries) would count nothing
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            response = client.post(url)
            times.append((time.perf_counter() - start) * 1000)
        body = response.json()
        if response.status_code != 200 or not body["instant"]:
            raise RuntimeError(f"allocation was not instant: {response.status_code} {body}")
        queries = len(ctx.captured_queries)
        give_back(body["vm"]["id"])
    return times, queries


def pool_allocation(measure):
    """POST /api/vmpools/{id}/allocatevm/ with a prestarted VM up, at 10 and 1,000 VMs."""
    rows, queries, made = [], {}, []
    for size in (10, 1_000):
        pool = make_pool(
            size, up=max(2, size // 20), taken=size // 2, prestarted=max(2, size // 20)
        )
        made.append(pool)
        times, queries[size] = _allocations(pool)
        p95 = _p95(times)
        rows.append(
            (
                f"allocate a prestarted VM via API (pool of {size:,} VMs)",
                f"p95 {p95:.1f} ms, median {statistics.median(times):.1f} ms "
                f"({ALLOCATIONS} allocations), {queries[size]} queries",
                "p95 <= 150 ms",
                "yes" if p95 <= 150 else "NO",
            )
        )
    remove_pools(made)
    rows.append(
        (
            "queries of one allocation at 10 / 1,000 VMs",
            f"{queries[10]} / {queries[1_000]}",
            "the same",
            "yes" if queries[10] == queries[1_000] else "NO",
        )
    )
    return rows


def _timed(run, reset, repeat: int = 3) -> tuple[float, int, object]:
    """Median milliseconds and queries of ``run()`` after ``reset()`` each time; last result."""
    times, queries, result = [], 0, None
    for _ in range(repeat):
        reset()
        connection.queries_log.clear()  # a full log (9,000 queries) would count nothing
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            result = run()
            times.append((time.perf_counter() - start) * 1000)
        queries = len(ctx.captured_queries)
    return statistics.median(times), queries, result


def pool_monitor(measure):
    """One prestart monitor run over 100 pools of 50 VMs (10 of each taken by users): every
    pool at its level of 2 prestarted VMs, and every pool missing both (200 starts queued)."""
    cluster = Cluster.objects.create(name=f"poolbench-monitor{next(_serial)}")
    pools = [make_pool(50, up=0, taken=10, prestarted=2, cluster=cluster) for _ in range(100)]
    rows = []
    for label, up in (("all at their level", 2), ("each missing 2", 0)):

        def reset(up=up):
            Job.objects.filter(vm__pool__in=pools).delete()
            OrmQ.objects.all().delete()
            free = VirtualMachine.objects.filter(pool__in=pools, owner__isnull=True)
            free.update(status=VmStatus.DOWN)
            first = free.filter(pool_index__lte=10 + up)
            first.update(status=VmStatus.UP)

        ms, queries, started = _timed(monitor.run_for_all_pools, reset)
        rows.append(
            (
                f"prestart monitor, 100 pools x 50 VMs ({label})",
                f"{ms:.0f} ms, {queries} queries, {sum(started.values())} starts queued",
                "<= 1000 ms",
                "yes" if ms <= 1000 else "NO",
            )
        )
    remove_pools(pools)
    return rows


def pool_refill(measure):
    """A burst of 20 allocations empties a pool's 20 prestarted VMs; then the nudges the burst
    queued run the pool's monitor (in this process, as the nudge task would) until start jobs
    for all 20 missing VMs are queued. The time from the burst's end until then."""
    pool = make_pool(60, up=20, prestarted=20)
    user = _pool_user(pool)
    OrmQ.objects.all().delete()
    for _ in range(20):
        services.allocate_vm(pool, user)
    burst_end = time.perf_counter()
    runs = 0
    while monitor.prestarted_count(pool) < pool.prestarted_vms:
        queued = OrmQ.objects.order_by("id")
        nudges = [t for t in queued if t.func() == task_path(tasks.run_monitor_on_nudge)]
        if not nudges:
            raise RuntimeError("the burst left too few nudges to refill the pool")
        nudges[0].delete()
        tasks.run_nudged(*nudges[0].args())  # what the nudge task runs
        runs += 1
    seconds = time.perf_counter() - burst_end
    remove_pools([pool])
    return [
        (
            "back at prestarted level after 20 allocations (start jobs queued)",
            f"{seconds * 1000:.0f} ms ({runs} nudged monitor runs, batch "
            f"{settings.VMPOOL_MONITOR_BATCH_SIZE})",
            "<= 10 s",
            "yes" if seconds <= 10 else "NO",
        )
    ]
