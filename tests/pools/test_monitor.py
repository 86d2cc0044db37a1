"""The prestart monitor: it keeps ``prestarted_vms`` VMs of a pool up and unassigned, starting
only what is missing, a batch at a time, and giving up on VMs that keep failing to start."""

import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import jobs
from hosts.models import Host, Job, JobKind, JobState, VirtualMachine, VmStatus
from hosts.operations import OPERATION_BY_KIND
from pools import monitor
from pools.tasks import run_monitor_on_nudge
from project.models import Event, EventKind
from tests.pools.fixtures import (
    pool_vms,
    prestart_jobs,
    queued_tasks,
    run_queued_tasks,
)


def _started(pool) -> list[str]:
    """Names of the pool's VMs with a prestart job queued."""
    return sorted(
        prestart_jobs(pool).filter(state=JobState.PENDING).values_list("vm__name", flat=True)
    )


# -- counting what is missing --------------------------------------------------------------------


@pytest.mark.django_db
def test_the_monitor_starts_the_missing_vms_lowest_numbers_first(pool_of):
    pool = pool_of(down=4, prestarted_vms=2)

    started = monitor.run_for_pool(pool.pk)

    assert started == 2
    assert _started(pool) == sorted(vm.name for vm in pool_vms(pool)[:2])


@pytest.mark.django_db
def test_up_and_starting_unassigned_vms_count_towards_the_prestarted_level(pool_of, make_user):
    pool = pool_of(up=2, down=4, prestarted_vms=4)
    up_free, up_taken, start_pending, status_starting, down_one, down_two = pool_vms(pool)
    VirtualMachine.objects.filter(pk=up_taken.pk).update(owner=make_user())
    jobs.submit(JobKind.START, vm=start_pending)
    VirtualMachine.objects.filter(pk=status_starting.pk).update(status=VmStatus.STARTING)

    started = monitor.run_for_pool(pool.pk)

    assert started == 1  # 4 wanted: up_free, start_pending and status_starting count
    assert _started(pool) == [down_one.name]


@pytest.mark.django_db
def test_a_start_job_already_running_counts_as_starting(pool_of):
    pool = pool_of(down=3, prestarted_vms=1)
    Job.objects.create(kind=JobKind.START, vm=pool_vms(pool)[2], state=JobState.RUNNING)

    assert monitor.run_for_pool(pool.pk) == 0


@pytest.mark.django_db
def test_a_pool_at_its_prestarted_level_starts_nothing(pool_of):
    pool = pool_of(up=2, down=2, prestarted_vms=2)

    assert monitor.run_for_pool(pool.pk) == 0
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_running_the_monitor_again_starts_nothing_more(pool_of):
    pool = pool_of(down=5, prestarted_vms=3)
    monitor.run_for_pool(pool.pk)

    again = monitor.run_for_pool(pool.pk)

    assert again == 0
    assert prestart_jobs(pool).count() == 3


@pytest.mark.django_db
def test_vms_held_by_an_admin_are_neither_counted_nor_started(pool_of):
    pool = pool_of(up=1, down=2, prestarted_vms=1)
    held_up, held_down, free_down = pool_vms(pool)
    VirtualMachine.objects.filter(pk__in=[held_up.pk, held_down.pk]).update(admin_hold=True)

    monitor.run_for_pool(pool.pk)

    assert _started(pool) == [free_down.name]


@pytest.mark.django_db
def test_the_monitor_starts_at_most_a_batch_per_run(pool_of, settings):
    # (A run over several pools shares one batch: tests/pools/test_prestarted_level.py.)
    settings.VMPOOL_MONITOR_BATCH_SIZE = 2
    pool = pool_of(down=6, prestarted_vms=5)

    first, second, third = (monitor.run_for_pool(pool.pk) for _ in range(3))

    assert (first, second, third) == (2, 2, 1)
    assert prestart_jobs(pool).count() == 5


@pytest.mark.django_db
def test_run_for_all_pools_covers_every_pool_that_keeps_vms_prestarted(pool_of):
    keeps, idle = pool_of(down=2, prestarted_vms=1), pool_of(down=2, prestarted_vms=0)

    started = monitor.run_for_all_pools()

    assert started == {keeps.pk: 1}
    assert prestart_jobs(idle).count() == 0


# -- failing prestarts ---------------------------------------------------------------------------


@pytest.fixture
def hostless_pool(pool_of):
    """A pool in a cluster without hosts: every start fails (no host)."""
    return pool_of(down=2, prestarted_vms=1)


def _monitor_and_run(pool, capture, clock=None) -> list[str]:
    """One monitor run and its start jobs, with what follows their commit; the VMs started.
    With ``clock`` (time-machine), the run comes after the longest back-off has passed."""
    if clock is not None:
        clock.move_to(timezone.now() + timedelta(hours=1, seconds=1))
    with capture(execute=True):
        monitor.run_for_pool(pool.pk)
        queued = list(prestart_jobs(pool).filter(state=JobState.PENDING))
        for job in queued:
            jobs.run(job.pk, OPERATION_BY_KIND)
    return [job.vm.name for job in queued]


@pytest.mark.django_db
def test_each_failed_prestart_is_counted_on_the_vm(
    hostless_pool, django_capture_on_commit_callbacks, time_machine
):
    first = pool_vms(hostless_pool)[0]

    _monitor_and_run(hostless_pool, django_capture_on_commit_callbacks, time_machine)
    _monitor_and_run(hostless_pool, django_capture_on_commit_callbacks, time_machine)

    first.refresh_from_db()
    assert first.prestart_failures == 2
    assert prestart_jobs(hostless_pool).filter(state=JobState.FAILED).count() == 2


@pytest.mark.django_db
def test_a_vm_that_failed_to_prestart_max_attempts_times_is_skipped_with_an_alert(
    hostless_pool, settings, django_capture_on_commit_callbacks, time_machine
):
    settings.VMPOOL_MONITOR_MAX_ATTEMPTS = 3
    first, second = pool_vms(hostless_pool)

    tried = [
        _monitor_and_run(hostless_pool, django_capture_on_commit_callbacks, time_machine)
        for _ in range(4)
    ]

    assert tried == [[first.name]] * 3 + [[second.name]]
    alerts = Event.objects.filter(kind=EventKind.ALERT, object_type="vm", object_id=first.pk)
    assert alerts.count() == 1
    assert "failed to prestart 3 times in a row" in alerts.get().message
    assert "No host" in alerts.get().message


@pytest.mark.django_db
def test_a_vm_that_failed_to_prestart_waits_longer_before_each_retry(
    pool_of, settings, django_capture_on_commit_callbacks, time_machine
):
    settings.VMPOOL_MONITOR_MAX_ATTEMPTS = 4
    settings.VMPOOL_MONITOR_INTERVAL = 60
    pool = pool_of(down=1, prestarted_vms=1)  # no hosts: every start fails
    vm = pool_vms(pool)[0]
    time_machine.move_to(timezone.now(), tick=False)

    def run() -> list[str]:
        return _monitor_and_run(pool, django_capture_on_commit_callbacks)

    assert run() == [vm.name]  # fails: the next try after 60 s
    assert run() == []
    time_machine.shift(59)
    assert run() == []
    time_machine.shift(2)
    assert run() == [vm.name]  # fails again: the next try after 120 s
    time_machine.shift(100)
    assert run() == []
    time_machine.shift(21)
    assert run() == [vm.name]
    vm.refresh_from_db()
    assert vm.prestart_failures == 3


@pytest.mark.django_db
def test_a_prestart_failure_no_retry_can_fix_gives_up_at_once_with_one_alert(
    pool_of, make_host, settings, django_capture_on_commit_callbacks, time_machine
):
    settings.VMPOOL_MONITOR_MAX_ATTEMPTS = 3
    pool = pool_of(down=1, prestarted_vms=1)
    host = make_host(cluster=pool.cluster, status="up", cpus=16, memory_mb=4096, memory_used_mb=0)
    # A URI Corral refuses, written straight into the database: no start on it can succeed.
    Host.objects.filter(pk=host.pk).update(uri="test+ext:///default?command=/bin/true")
    vm = pool_vms(pool)[0]

    tried = [
        _monitor_and_run(pool, django_capture_on_commit_callbacks, time_machine) for _ in range(3)
    ]

    assert tried == [[vm.name], [], []]
    failed = prestart_jobs(pool).get()
    assert failed.error_code == "uri_refused"
    alerts = Event.objects.filter(kind=EventKind.ALERT, object_type="vm", object_id=vm.pk)
    assert [alert.message for alert in alerts] == [
        f"VM {vm.name} failed to prestart in a way no retry can fix; the pool skips it until an "
        f"admin looks at it ({failed.error_message})"
    ]


@pytest.mark.django_db
def test_a_prestart_that_succeeds_clears_the_failure_count(
    pool_of, sim_cluster, django_capture_on_commit_callbacks
):
    pool = pool_of(down=1, prestarted_vms=1, cluster=sim_cluster)
    vm = pool_vms(pool)[0]
    VirtualMachine.objects.filter(pk=vm.pk).update(prestart_failures=2)

    _monitor_and_run(pool, django_capture_on_commit_callbacks)

    vm.refresh_from_db()
    assert (vm.status, vm.prestart_failures) == (VmStatus.UP, 0)


@pytest.mark.django_db
def test_a_vm_given_up_on_is_prestarted_again_once_any_start_of_it_succeeds(
    pool_of, sim_cluster, settings, django_capture_on_commit_callbacks
):
    settings.VMPOOL_MONITOR_MAX_ATTEMPTS = 3
    pool = pool_of(down=1, prestarted_vms=1, cluster=sim_cluster, stateless=False)
    vm = pool_vms(pool)[0]
    VirtualMachine.objects.filter(pk=vm.pk).update(prestart_failures=3)
    assert monitor.run_for_pool(pool.pk) == 0

    # An admin starts it by hand (the host problem is fixed), then powers it off again.
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND) == JobState.SUCCEEDED
        )
    vm.refresh_from_db()
    assert (vm.status, vm.prestart_failures) == (VmStatus.UP, 0)
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            jobs.run(jobs.submit(JobKind.POWEROFF, vm=vm).pk, OPERATION_BY_KIND)
            == JobState.SUCCEEDED
        )

    assert monitor.run_for_pool(pool.pk) == 1
    assert _started(pool) == [vm.name]


@pytest.mark.django_db
def test_a_failed_start_a_user_asked_for_is_not_a_failed_prestart(
    hostless_pool, django_capture_on_commit_callbacks
):
    vm = pool_vms(hostless_pool)[0]
    with django_capture_on_commit_callbacks(execute=True):
        jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND)

    vm.refresh_from_db()
    assert vm.prestart_failures == 0


# -- cost ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_one_monitor_run_over_100_pools_of_50_vms_takes_as_many_queries_as_over_one(
    pool_of, make_cluster, django_assert_max_num_queries, settings
):
    settings.VMPOOL_MONITOR_BATCH_SIZE = 200  # room for every pool's two in one run
    cluster = make_cluster()
    one = pool_of(down=50, prestarted_vms=2, cluster=cluster)
    with CaptureQueriesContext(connection) as per_pool:
        monitor.run_for_all_pools()
    Job.objects.all().delete()
    for _ in range(99):
        pool_of(down=50, prestarted_vms=2, cluster=cluster)

    # SQLite caps the parameters of one statement, so its bulk inserts of the 200 jobs and
    # their events come in a few chunks; PostgreSQL takes each in one.
    chunks = 6 if connection.vendor == "sqlite" else 0
    with django_assert_max_num_queries(len(per_pool) + chunks):
        started = monitor.run_for_all_pools()

    assert len(started) == 100 and set(started.values()) == {2}
    assert prestart_jobs(one).count() == 2


@pytest.mark.django_db
def test_a_monitor_run_over_pools_at_their_level_takes_one_query(
    pool_of, make_user, django_assert_num_queries
):
    for _ in range(20):
        pool = pool_of(up=3, down=2, prestarted_vms=2)
        VirtualMachine.objects.filter(pk=pool_vms(pool)[0].pk).update(owner=make_user())

    with django_assert_num_queries(1):
        started = monitor.run_for_all_pools()

    assert started == {}


# -- two monitors at once (PostgreSQL) -----------------------------------------------------------


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("two monitors at once need PostgreSQL's row locks; SQLite has one writer")


def test_two_monitors_at_once_never_start_more_than_is_missing(postgres_only, pool_of, settings):
    settings.VMPOOL_MONITOR_BATCH_SIZE = 10
    pool = pool_of(up=1, down=9, prestarted_vms=5)
    ready = threading.Barrier(4)
    outcomes = []

    def run_monitor() -> None:
        close_old_connections()
        try:
            ready.wait(10)
            outcomes.append(monitor.run_for_pool(pool.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=run_monitor) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(outcomes) == [0, 0, 0, 4]
    assert prestart_jobs(pool).count() == 4


# -- with real hosts -----------------------------------------------------------------------------


def _free_up(pool) -> list[str]:
    return sorted(
        VirtualMachine.objects.filter(
            pool=pool, owner__isnull=True, status=VmStatus.UP
        ).values_list("name", flat=True)
    )


def test_a_new_pool_ends_with_its_prestarted_vms_up_and_unassigned(real_pool):
    pool = real_pool(size=3, prestarted_vms=2)

    run_queued_tasks()

    assert len(_free_up(pool)) == 2
    assert [vm.status for vm in pool_vms(pool)].count(VmStatus.DOWN) == 1


def test_a_monitor_run_that_comes_before_the_vms_are_prepared_still_reaches_the_level(
    real_pool,
):
    pool = real_pool(size=3, prestarted_vms=2)
    [nudge] = queued_tasks(run_monitor_on_nudge)
    nudge.delete()  # a second worker takes the nudge while the prepare jobs still run
    monitor.run_for_pool(pool.pk)

    run_queued_tasks()

    assert len(_free_up(pool)) == 2


def test_after_an_allocation_the_nudged_monitor_brings_the_pool_back_to_its_level(
    real_pool, pool_user, client_for
):
    pool = real_pool(size=4, prestarted_vms=2)
    run_queued_tasks()
    client = client_for(pool_user(pool))

    taken = client.post(f"/api/vmpools/{pool.pk}/allocatevm/").json()
    assert taken["instant"] is True
    assert len(_free_up(pool)) == 1
    run_queued_tasks()

    assert len(_free_up(pool)) == 2
    assert taken["vm"]["name"] not in _free_up(pool)
    assert VirtualMachine.objects.get(pk=taken["vm"]["id"]).status == VmStatus.UP
