"""Two hundred users take VMs from two pools at the same moment, through a real web server,
while a real task cluster keeps the pools prestarted.

Each pool has 30 VMs, 25 of them prestarted (50 running and waiting in all); one pool lets a
user hold one VM, the other two. Every user asks twice at once. Every request is answered (a
VM, or a 409 saying the pool is exhausted or the user is at the limit), no VM goes to two
users, no user passes a pool's limit, the database says what the answers said, every job
ends well, and whatever the crowd left free can still be taken.
"""

from __future__ import annotations

from collections import Counter

import pytest
import requests

from hosts import driver
from hosts.models import JobKind, JobState, VirtualMachine, VmStatus
from pools.models import VmPool
from tests.reliability.conftest import token_for
from tests.reliability.crowd import POSTGRES_ONLY, not_json, post_all, scaled
from tests.reliability.test_scale_out import _pool_jobs, _takers, _wait_settled

pytestmark = [pytest.mark.slow, pytest.mark.postgres, POSTGRES_ONLY]

POOL_SIZE = scaled(30)
PRESTARTED = scaled(25)  # per pool: 50 prestarted in all
USERS = scaled(200)  # half for each pool, each asking twice at once
LIMITS = (1, 2)  # max_user_vms of each pool
CLUSTER_ENV = {
    "Q_WORKERS": "4",
    "VMPOOL_MONITOR_INTERVAL": "2",
    "VMPOOL_MONITOR_BATCH_SIZE": "25",
    # A loaded 2-core machine must not pass for a dead worker or a stuck scheduler.
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "60",
    "CORRAL_SCHEDULER_LOCK_TIMEOUT": "60",
}


def _refusals(pool: VmPool) -> tuple[str, str]:
    """What the pool answers a user at its limit, and anyone once it has no VM left."""
    limit = (
        f"You hold {pool.max_user_vms} VM(s) of {pool.name}, its limit per user; "
        "return one before taking another."
    )
    return limit, f"Pool {pool.name} has no free VM left; try again later."


def _owners(pool: VmPool) -> dict[int, int]:
    return dict(
        VirtualMachine.objects.filter(pool=pool, owner__isnull=False).values_list("pk", "owner")
    )


def test_two_hundred_users_at_once_share_out_two_pools_without_giving_a_vm_twice(
    real_pool, task_cluster, web_server
):
    pools = [
        real_pool(size=POOL_SIZE, prestarted_vms=PRESTARTED, max_user_vms=limit) for limit in LIMITS
    ]
    takers = {pool.pk: _takers(pool, USERS // 2) for pool in pools}
    workers = [task_cluster(**CLUSTER_ENV)]
    servers = [web_server()]
    for pool in pools:
        _wait_settled(pool, workers, servers)
        counts = VmPool.objects.with_counts().get(pk=pool.pk)
        assert (counts.running_unassigned, counts.assigned_vms) == (PRESTARTED, 0)
    prestarted = set(
        VirtualMachine.objects.filter(pool__in=pools, status=VmStatus.UP).values_list(
            "pk", flat=True
        )
    )
    calls = [
        (user, f"/api/vmpools/{pool.pk}/allocatevm/", None)
        for pool in pools
        for user in takers[pool.pk]
        for _ in range(2)
    ]

    answers = post_all(servers[0].url, calls)

    assert len(answers) == len(calls) == 2 * USERS
    assert not_json(answers) == []
    assert [(a.status, a.body) for a in answers if a.status not in (200, 409)] == []
    given = [a for a in answers if a.status == 200]
    assert len({a.body["vm"]["id"] for a in given}) == len(given)  # no VM given twice
    for pool in pools:
        asked = [a for a in answers if a.path == f"/api/vmpools/{pool.pk}/allocatevm/"]
        taken = [a for a in asked if a.status == 200]
        assert 0 < len(taken) <= POOL_SIZE
        assert {a.body["vm"]["pool"] for a in taken} == {pool.pk}
        assert all(a.body["vm"]["owner"] == a.user.username for a in taken)
        held = Counter(a.user.pk for a in taken)
        assert max(held.values()) <= pool.max_user_vms, pool.name
        limit, exhausted = _refusals(pool)
        refused = [a for a in asked if a.status == 409]
        assert {a.body["detail"] for a in refused} <= {limit, exhausted}
        at_limit = [a for a in refused if a.body["detail"] == limit]
        assert all(held[a.user.pk] == pool.max_user_vms for a in at_limit)
        for answer in taken:
            vm = answer.body["vm"]
            if answer.body["instant"]:
                assert (answer.body["job"], vm["status"]) == (None, VmStatus.UP)
            else:  # one being started for the user: the answer names its start job
                assert answer.body["job"]["kind"] == JobKind.START
                assert answer.body["job"]["vm"] == vm["id"]
                assert vm["id"] not in prestarted  # a VM running all along goes at once
        assert _owners(pool) == {a.body["vm"]["id"]: a.user.pk for a in taken}
        assert max(Counter(_owners(pool).values()).values()) <= pool.max_user_vms

    for pool in pools:
        _wait_settled(pool, workers, servers)
    for pool in pools:
        jobs = _pool_jobs(pool)
        unfinished = jobs.exclude(state=JobState.SUCCEEDED)
        assert [(j.pk, j.kind, j.state, j.error_message) for j in unfinished] == []
        assert jobs.filter(kind=JobKind.PREPARE).count() == POOL_SIZE
        held = VirtualMachine.objects.filter(pool=pool, owner__isnull=False).select_related("host")
        assert {vm.name: vm.status for vm in held} == {vm.name: VmStatus.UP for vm in held}
        reported = {vm.name: driver.domain_power_state(vm.host.uri, str(vm.uuid)) for vm in held}
        assert reported == {vm.name: "running" for vm in held}

    # Nothing lost: every VM the crowd left free goes, one by one, to a user who has none,
    # and then the pool says it is exhausted.
    for pool in pools:
        owners = _owners(pool)
        left = POOL_SIZE - len(owners)
        empty_handed = [u for u in takers[pool.pk] if u.pk not in set(owners.values())]
        assert len(empty_handed) > left
        url = f"{servers[0].url}/api/vmpools/{pool.pk}/allocatevm/"
        late = [
            requests.post(url, headers=token_for(user), timeout=60)
            for user in empty_handed[: left + 1]
        ]
        assert [r.status_code for r in late] == [200] * left + [409]
        assert late[-1].json()["detail"] == _refusals(pool)[1]
        assert len(_owners(pool)) == POOL_SIZE
    assert all(w.process.poll() is None for w in workers) and servers[0].running()
