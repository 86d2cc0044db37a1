"""A task worker frozen (SIGSTOP: a paused machine, a long stall) in the middle of a start;
its heartbeat goes stale, so the ticker fails the job as ``worker_lost`` and sets the VM to
what its host reports. When the worker wakes up it must not carry on with the job it lost: a
failed job does nothing more, and its VM stays as the reaper left it.
"""

from __future__ import annotations

import contextlib
import os
import signal

import pytest
from django_q.models import Task

from hosts import jobs
from hosts.models import Host, Job, JobJournal, JobKind, JobState
from lab.hostview import disagreements, look
from tests.conftest import wait_until

pytestmark = pytest.mark.slow

CLUSTER_ENV = {
    "CORRAL_TICKER_RUN_SECONDS": "1",
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "6",
}
WAIT_S = 60

# Waits in the hook until the release file exists.
WAIT = """
while [ ! -e {released} ]; do sleep 0.1; done
"""


@contextlib.contextmanager
def frozen(pid: int):
    """The process stopped (SIGSTOP) inside the block, then resumed."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_worker_that_wakes_after_its_job_was_failed_does_nothing_more(
    sim_vm,
    hooks_dir,
    task_cluster,
):
    released = hooks_dir.folder / "released"
    hooks_dir("vm-pre-start", "50-wait", WAIT.format(released=released))
    vm = sim_vm()
    job = jobs.submit(JobKind.START, vm=vm)
    cluster = task_cluster(CORRAL_HOOKS_DIR=hooks_dir.folder, **CLUSTER_ENV)
    wait_until(
        lambda: Job.objects.filter(pk=job.pk, step="Running vm-pre-start hooks").exists(),
        timeout=WAIT_S,
        message=lambda: f"the start never reached its hook: {cluster.log()[-3000:]}",
    )
    worker = int(Job.objects.get(pk=job.pk).worker.rsplit(":", 1)[1])

    with frozen(worker):
        wait_until(
            lambda: Job.objects.filter(pk=job.pk, state=JobState.FAILED).exists(),
            timeout=WAIT_S,
            message=lambda: f"the frozen worker's job was never failed: {cluster.log()[-3000:]}",
        )
        released.touch()
    # The worker wakes up, its hook returns, and it reaches its next step.
    wait_until(
        lambda: Task.objects.filter(name=f"job-{job.pk}").exists(),
        timeout=WAIT_S,
        message=lambda: f"the woken worker never ended its task: {cluster.log()[-3000:]}",
    )

    failed = Job.objects.get(pk=job.pk)
    assert (failed.state, failed.error_code) == (JobState.FAILED, "worker_lost")
    # Nothing after the failure but the end of the hook that was under way: no further step.
    assert failed.step == "Running vm-pre-start hooks"
    journal = list(
        JobJournal.objects.filter(job=job).order_by("pk").values_list("message", flat=True)
    )
    after = journal[journal.index("Failed: its worker stopped responding") + 1 :]
    assert after in ([], ["Hook vm-pre-start/50-wait ran"])
    vm.refresh_from_db()
    assert (vm.status, vm.host_id) == ("down", None)
    assert look(Host.objects.all()).where(vm) == {}
    assert disagreements([vm]) == []
