"""The reaper: a job whose worker is gone, or that ran too long, is failed and its VM set to
what its host reports; a healthy job is left alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from project.models import Event, EventKind
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _running_start(vm: VirtualMachine, *, worker: str, started_ago: float = 1) -> Job:
    """A start job on ``vm`` as a worker leaves it mid-way: running, VM Starting."""
    now = timezone.now()
    job = jobs.submit(JobKind.START, vm=vm)
    Job.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING,
        worker=worker,
        started_at=now - timedelta(seconds=started_ago),
        heartbeat_at=now,
    )
    VirtualMachine.objects.filter(pk=vm.pk).update(status=VmStatus.STARTING)
    return Job.objects.get(pk=job.pk)


def test_a_job_whose_worker_on_this_machine_is_gone_is_failed_at_once(sim_vm):
    vm = sim_vm()
    job = _running_start(vm, worker=f"{socket.gethostname()}:{_dead_pid()}")

    assert jobs.reap() == [job.pk]

    job.refresh_from_db()
    assert (job.state, job.error_code) == (JobState.FAILED, "worker_lost")
    assert "is gone" in job.error_message
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.DOWN


def test_a_job_whose_worker_lives_or_runs_elsewhere_is_left_to_its_heartbeat(sim_vm):
    alive = _running_start(sim_vm(), worker=f"{socket.gethostname()}:{_this_pid()}")
    elsewhere = _running_start(sim_vm(), worker=f"another-machine:{_dead_pid()}")

    assert jobs.reap() == []

    assert Job.objects.get(pk=alive.pk).state == JobState.RUNNING
    assert Job.objects.get(pk=elsewhere.pk).state == JobState.RUNNING


def test_a_job_running_longer_than_the_limit_is_failed_and_its_vm_settled(sim_vm, settings):
    settings.CORRAL_JOB_MAX_SECONDS = 60
    vm = sim_vm()
    old = _running_start(vm, worker=f"{socket.gethostname()}:{_this_pid()}", started_ago=61)
    young = _running_start(sim_vm(), worker=f"{socket.gethostname()}:{_this_pid()}")

    assert jobs.reap() == [old.pk]

    old.refresh_from_db()
    assert (old.state, old.error_code) == (JobState.FAILED, "timeout")
    assert "longer than 60 s" in old.error_message
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.DOWN
    assert Job.objects.get(pk=young.pk).state == JobState.RUNNING


def test_a_worker_whose_job_was_reaped_during_a_long_step_stops_without_finishing_it(
    transactional_db, sim_vm, hooks_dir, job_in_thread, settings
):
    """The job is failed while its worker is inside one long step (a slow hook): when the step
    returns, the worker neither finishes the job nor settles the VM again."""
    settings.CORRAL_JOB_MAX_SECONDS = 60
    flag = hooks_dir.folder / "released"
    hooks_dir("vm-post-start", "50-slow", f"while [ ! -e {flag} ]; do sleep 0.1; done")
    vm = sim_vm()
    job = jobs.submit(JobKind.START, vm=vm)
    worker = job_in_thread(job)
    wait_until(lambda: Job.objects.get(pk=job.pk).step.startswith("Running vm-post-start"))

    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(seconds=61))
    assert jobs.reap() == [job.pk]
    flag.touch()
    worker.join(30)

    assert worker.outcome == "lost"
    job.refresh_from_db()
    assert (job.state, job.error_code) == (JobState.FAILED, "timeout")
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.UP  # as its host reports
    assert not Event.objects.filter(kind=EventKind.ALERT, vm_id=vm.pk).exists()


def _this_pid() -> int:
    return os.getpid()
