"""A task cluster killed mid-job: the next one fails the job, settles the VM, runs the queue."""

import pytest

from hosts import driver, jobs
from hosts.models import STATIONARY_STATUSES, Job, JobKind, JobState, VirtualMachine
from hosts.models.jobs import RUNNING_JOB_STATES
from hosts.sync import status_for
from tests.conftest import wait_until

pytestmark = pytest.mark.slow

# Short ticker runs so that stopping a cluster at the end of a test does not wait long.
CLUSTER_ENV = {"CORRAL_TICKER_RUN_SECONDS": "1"}
RECOVERY_S = 60


def _job(job_id: int) -> Job:
    return Job.objects.get(pk=job_id)


def _crash_while(task_cluster, hooks_dir, job: Job, step: str):
    """Start a cluster, wait until ``job`` is at ``step``, kill -9 it, start a fresh one."""
    env = {"CORRAL_HOOKS_DIR": hooks_dir.folder, **CLUSTER_ENV}
    first = task_cluster(**env)
    wait_until(
        lambda: _job(job.pk).step == step and _job(job.pk).state == JobState.RUNNING,
        timeout=30,
        message=lambda: f"job never reached {step!r}: {first.log()[-3000:]}",
    )
    first.kill()
    second = task_cluster(**env)
    second.crashed = first
    return second


def _logs(cluster) -> str:
    return f"{cluster.crashed.log()[-2000:]}\n--- after the crash ---\n{cluster.log()[-3000:]}"


def _finished(job_id: int) -> Job | None:
    job = _job(job_id)
    return job if job.state not in (JobState.PENDING, *RUNNING_JOB_STATES) else None


def _wait_recovered(job: Job, vm: VirtualMachine, cluster) -> Job:
    """Wait until ``job`` has ended and its VM is in a stationary status again."""

    def recovered():
        vm.refresh_from_db()
        return vm.status in STATIONARY_STATUSES and _finished(job.pk)

    return wait_until(
        recovered,
        timeout=RECOVERY_S,
        message=lambda: f"job {_job(job.pk).state}, VM {vm.status}: {_logs(cluster)}",
    )


def _host_state(vm: VirtualMachine, daemons) -> dict[str, str | None]:
    return {d.name: driver.domain_power_state(d.uri, str(vm.uuid)) for d in daemons}


def test_a_start_interrupted_by_a_crash_fails_and_its_vm_takes_what_its_host_reports(
    task_cluster, sim_vm, hooks_dir, sim_daemons
):
    hooks_dir("vm-post-start", "50-slow", "sleep 60")
    vm = sim_vm()
    job = jobs.submit(JobKind.START, vm=vm)

    second = _crash_while(task_cluster, hooks_dir, job, "Running vm-post-start hooks")

    failed = _wait_recovered(job, vm, second)
    assert (failed.state, failed.error_code) == (JobState.FAILED, "worker_lost")
    assert not Job.objects.filter(state__in=RUNNING_JOB_STATES).exists()
    reported = _host_state(vm, sim_daemons)
    assert reported[vm.host.name] == "running"
    assert vm.status == status_for(reported[vm.host.name]) == "up"


def test_a_migration_interrupted_by_a_crash_leaves_the_vm_up_where_its_host_says(
    task_cluster, running_vm, hooks_dir, sim_daemons
):
    vm = running_vm()
    source = vm.host
    hooks_dir("vm-pre-migrate", "50-slow", "sleep 60")
    job = jobs.submit(JobKind.MIGRATE, vm=vm)

    second = _crash_while(task_cluster, hooks_dir, job, "Running vm-pre-migrate hooks")

    failed = _wait_recovered(job, vm, second)
    assert (failed.state, failed.error_code) == (JobState.FAILED, "worker_lost")
    assert (vm.status, vm.host_id, vm.migrating_to_id) == ("up", source.pk, None)
    assert _host_state(vm, sim_daemons)[source.name] == "running"
    assert not Job.objects.filter(state__in=RUNNING_JOB_STATES).exists()


def test_a_job_queued_behind_the_interrupted_one_runs_after_the_recovery(
    task_cluster, sim_vm, hooks_dir, sim_daemons
):
    hooks_dir("vm-pre-start", "50-slow", "sleep 60")
    vm = sim_vm()
    interrupted = jobs.submit(JobKind.START, vm=vm)
    queued = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 2})

    second = _crash_while(task_cluster, hooks_dir, interrupted, "Running vm-pre-start hooks")

    done = wait_until(
        lambda: _finished(queued.pk), timeout=RECOVERY_S, message=lambda: _logs(second)
    )
    assert done.state == JobState.SUCCEEDED
    assert _job(interrupted.pk).error_code == "worker_lost"
    assert done.started_at > _job(interrupted.pk).finished_at
