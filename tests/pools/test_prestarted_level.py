"""What counts as prestarted, and how a monitor run shares its batch among pools.

A pool VM counts toward ``prestarted_vms`` while it is unassigned, not held, and running,
paused, on its way up, migrating or unknown (oVirt's "qualifies to migrate" plus Unknown): the
monitor, the API's pool counts, the admin console, the dashboard and /metrics count alike. A
monitor run starts at most ``VMPOOL_MONITOR_BATCH_SIZE`` VMs across all pools, round-robin.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from hosts import driver, jobs
from hosts.models import JobKind, JobState, VirtualMachine, VmStatus
from pools import monitor
from pools.models import VmPool
from project.models import LoopLock
from tests.conftest import wait_until
from tests.pools.fixtures import add_pool_vms, pool_vms, prestart_jobs
from tests.project.admin.fixtures import logged_in

COUNTED = ["up", "starting", "paused", "resuming", "suspending", "migrating", "unknown"]
NOT_COUNTED = ["down", "stopping"]


def _started(pool) -> int:
    return prestart_jobs(pool).filter(state=JobState.PENDING).count()


# -- what counts -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("status", COUNTED)
def test_an_unassigned_vm_that_runs_pauses_moves_or_is_unknown_counts_as_prestarted(
    pool_of, status
):
    pool = pool_of(down=2, prestarted_vms=1)
    VirtualMachine.objects.filter(pk=pool_vms(pool)[0].pk).update(status=status)

    assert monitor.run_for_pool(pool.pk) == 0
    assert _started(pool) == 0


@pytest.mark.django_db
@pytest.mark.parametrize("status", NOT_COUNTED)
def test_a_stopped_or_stopping_vm_does_not_count_and_another_is_started(pool_of, status):
    pool = pool_of(down=2, prestarted_vms=1)
    first, second = pool_vms(pool)
    VirtualMachine.objects.filter(pk=first.pk).update(status=status)

    assert monitor.run_for_pool(pool.pk) == 1
    assert list(prestart_jobs(pool).values_list("vm_id", flat=True)) == [
        first.pk if status == "down" else second.pk
    ]


@pytest.fixture
def mixed_pool(pool_of, make_user):
    """A pool wanting 6 prestarted VMs, with 4 that count (up, paused, unknown, and a start job
    queued) and 5 that do not (stopping, taken, held, down twice)."""
    pool = pool_of(size=9, prestarted_vms=6, name="mixed")
    add_pool_vms(pool, ["up", "paused", "unknown", "down", "stopping"])
    add_pool_vms(pool, ["up"], owner=make_user())
    add_pool_vms(pool, ["up"], admin_hold=True)
    add_pool_vms(pool, ["down", "down"])
    queued = pool_vms(pool)[3]
    jobs.submit(JobKind.START, vm=queued)
    return pool


def _scraped_prestarted(client, settings) -> dict[str, float]:
    settings.CORRAL_METRICS_TOKEN = "scrape-token-for-pools"
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-for-pools")
    assert response.status_code == 200
    return {
        sample.labels["pool"]: sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
        if sample.name == "corral_pool_prestarted"
    }


@pytest.mark.django_db
def test_the_api_the_admin_the_dashboard_metrics_and_the_monitor_count_alike(
    mixed_pool, admin_user, client_for, client, settings
):
    api = client_for(admin_user).get(f"/api/vmpools/{mixed_pool.pk}/").json()["counts"]
    console = logged_in(admin_user)
    changelist = console.get(reverse("admin:pools_vmpool_changelist"), {"prestarted": "short"})
    dashboard = console.get(reverse("admin:index")).content.decode()
    scraped = _scraped_prestarted(client, settings)

    assert api == {
        "total": 9,
        "prestarted": 4,
        "running_unassigned": 1,
        "ready": 1,
        "takeable": 4,  # the Up one, the one being started, the two Down ones
        "assigned": 1,
        "starting": 1,
        "held": 1,
    }
    assert scraped == {"mixed": 4}
    assert [pool.name for pool in changelist.context["cl"].result_list] == ["mixed"]
    assert changelist.context["cl"].result_list[0].prestarted_now == 4
    assert re.search(r'data-pool="mixed".*?data-prestarted="4" data-wanted="6"', dashboard)
    assert monitor.run_for_pool(mixed_pool.pk) == 2  # the two Down ones: 4 + 2 = 6


@pytest.mark.django_db
def test_a_pool_whose_paused_and_unknown_vms_reach_its_level_is_not_short_anywhere(
    pool_of, admin_user, client, settings
):
    pool = pool_of(size=3, prestarted_vms=2, name="steady")
    add_pool_vms(pool, ["paused", "unknown", "down"])
    console = logged_in(admin_user)

    changelist = console.get(reverse("admin:pools_vmpool_changelist"), {"prestarted": "short"})

    assert changelist.context["cl"].result_count == 0
    assert _scraped_prestarted(client, settings) == {"steady": 2}
    assert monitor.run_for_all_pools() == {}


# -- the batch across pools --------------------------------------------------------------------


@pytest.mark.django_db
def test_one_run_starts_at_most_a_batch_across_every_pool_round_robin(pool_of, settings):
    settings.VMPOOL_MONITOR_BATCH_SIZE = 4
    big = pool_of(down=12, prestarted_vms=10)
    small_a, small_b = pool_of(down=3, prestarted_vms=2), pool_of(down=3, prestarted_vms=2)

    first = monitor.run_for_all_pools()
    second = monitor.run_for_all_pools()

    assert first == {big.pk: 2, small_a.pk: 1, small_b.pk: 1}
    assert second == {big.pk: 2, small_a.pk: 1, small_b.pk: 1}
    assert [_started(p) for p in (big, small_a, small_b)] == [4, 2, 2]


@pytest.mark.django_db
def test_pools_a_run_could_not_reach_are_served_first_by_the_next(pool_of, settings):
    settings.VMPOOL_MONITOR_BATCH_SIZE = 2
    pools = [pool_of(down=2, prestarted_vms=2) for _ in range(4)]

    first = monitor.run_for_all_pools()
    second = monitor.run_for_all_pools()

    assert first == {pools[0].pk: 1, pools[1].pk: 1, pools[2].pk: 0, pools[3].pk: 0}
    assert second == {pools[0].pk: 0, pools[1].pk: 0, pools[2].pk: 1, pools[3].pk: 1}
    assert [_started(p) for p in pools] == [1, 1, 1, 1]


@pytest.mark.django_db
def test_a_pool_with_fewer_prestarted_vms_is_served_before_a_fuller_one(pool_of, settings):
    settings.VMPOOL_MONITOR_BATCH_SIZE = 3
    fuller = pool_of(up=3, down=3, prestarted_vms=6)
    emptier = pool_of(down=6, prestarted_vms=6)

    started = monitor.run_for_all_pools()

    assert started == {fuller.pk: 0, emptier.pk: 3}


# -- with a real task cluster and simulated hosts ---------------------------------------------


def _monitor_claimed_after(moment: float, interval: float) -> bool:
    """Whether the ticker's prestart monitor claimed a run after ``moment`` (its due lock
    expires one interval after each claim)."""
    lock = LoopLock.objects.filter(name="due-pool-monitor").first()
    return lock is not None and lock.expires_at.timestamp() - interval > moment


@pytest.mark.slow
def test_a_prestarted_vm_paused_outside_corral_still_counts_and_no_second_one_starts(
    real_pool, task_cluster
):
    pool = real_pool(size=2, prestarted_vms=1)
    workers = task_cluster(VMPOOL_MONITOR_INTERVAL="1")

    def one_up_and_idle():
        vms = pool_vms(pool)
        up = [vm for vm in vms if vm.status == VmStatus.UP]
        busy = prestart_jobs(pool).filter(state__in=["pending", "running"]).exists()
        return up[0] if len(up) == 1 and not busy else None

    vm = wait_until(one_up_and_idle, timeout=60, message=lambda: workers.log()[-3000:])
    driver.suspend(vm.host.uri, str(vm.uuid))  # behind Corral's back
    wait_until(
        lambda: VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.PAUSED,
        timeout=30,
        message="the sync never saw the VM paused",
    )
    paused_at = timezone.now().timestamp()
    # A claim 2.5 s after the pause: the run claimed a second before it saw the VM paused
    # too, and has had that second to finish.
    wait_until(lambda: _monitor_claimed_after(paused_at + 2.5, interval=1), timeout=30)

    assert prestart_jobs(pool).count() == 1
    other = next(other for other in pool_vms(pool) if other.pk != vm.pk)
    assert other.status == VmStatus.DOWN
    assert VmPool.objects.with_counts().get(pk=pool.pk).prestarted_now == 1
