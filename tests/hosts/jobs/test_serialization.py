"""Jobs on one VM run one at a time, in submission order, on a real task cluster."""

import threading

from django.db import close_old_connections, connection

from hosts import driver, jobs
from hosts.models import Job, JobKind, JobState
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import wait_until


def _finished(ids):
    return Job.objects.filter(pk__in=ids, state=JobState.SUCCEEDED).count() == len(ids)


def test_concurrent_submissions_on_one_vm_never_overlap_and_run_in_order(
    task_cluster, make_vm, admin_user
):
    vm = make_vm()
    cluster = task_cluster()
    submitted = []
    lock = threading.Lock()

    def submit(index):
        close_old_connections()
        try:
            job = jobs.submit(
                JobKind.NOOP,
                vm=vm,
                params={"steps": 2, "sleep": 0.2, "n": index},
                requested_by=admin_user,
            )
            with lock:
                submitted.append(job.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    wait_until(lambda: _finished(submitted), timeout=60, message=cluster.log()[-3000:])
    runs = list(Job.objects.filter(pk__in=submitted).order_by("started_at"))
    assert [job.pk for job in runs] == sorted(submitted)
    for earlier, later in zip(runs, runs[1:], strict=False):
        assert earlier.finished_at <= later.started_at


def test_jobs_on_different_vms_run_in_parallel(task_cluster, make_vm, admin_user):
    vms = [make_vm(), make_vm()]
    task_cluster()
    ids = [jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 2, "sleep": 2.0}).pk for vm in vms]
    wait_until(lambda: _finished(ids), timeout=60)
    first, second = Job.objects.filter(pk__in=ids).order_by("started_at")
    assert second.started_at < first.finished_at


def test_an_identical_pending_request_is_coalesced_into_the_first(db, make_vm, admin_user):
    vm = make_vm()
    first = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 1})
    again = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 1})
    other = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 2})

    assert again.pk == first.pk and again.coalesced == 1
    assert other.pk != first.pk
    assert Job.objects.filter(vm=vm).count() == 2


def test_start_shutdown_start_leaves_the_vm_up_as_last_asked(transactional_db, sim_vm):
    vm = sim_vm()

    submitted = [jobs.submit(kind, vm=vm) for kind in ("start", "shutdown", "start")]

    queue = list(Job.objects.filter(vm=vm).order_by("id").values_list("kind", "coalesced"))
    assert queue == [("start", 0), ("shutdown", 0), ("start", 0)]
    assert len({job.pk for job in submitted}) == 3
    for job in submitted:
        assert jobs.run(job.pk, OPERATION_BY_KIND) == "succeeded", Job.objects.get(
            pk=job.pk
        ).error_message
    vm.refresh_from_db()
    assert vm.status == "up"
    assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "running"
