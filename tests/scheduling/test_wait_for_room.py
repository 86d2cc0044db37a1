"""When no host is left for a VM while another VM is still starting, the start waits for the
cluster to settle and tries once more: the other start failing frees the host for it, and when
nothing frees up it fails after that one retry, saying why."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import wait_until

RETRY = "No host fitted while the cluster was settling; trying once more"


@pytest.fixture
def crowded(sim_cluster, vm_in, make_template):
    """One simulated host (3072 MiB) whose memory a VM still Starting holds (2048 MiB), its
    start job's worker gone silent; and a Down VM of the same size to start."""
    cluster, (host,) = sim_cluster(count=1)
    big = make_template(vcpus=1, memory_mb=2048, disk_gb=1)
    starting = vm_in(cluster, template=big, host=host, status=VmStatus.STARTING)
    stuck = jobs.submit(JobKind.START, vm=starting)
    Job.objects.filter(pk=stuck.pk).update(
        state=JobState.RUNNING,
        worker="a worker that stopped",
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    waiting = vm_in(cluster, template=big)
    return host, starting, waiting


def _start_in_thread(vm: VirtualMachine) -> tuple[Job, threading.Thread]:
    job = jobs.submit(JobKind.START, vm=vm)

    def run() -> None:
        try:
            jobs.run(job.pk, OPERATION_BY_KIND)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name=f"start-{vm.pk}", daemon=True)
    thread.start()
    return job, thread


def _journal(job: Job) -> list[str]:
    return list(job.journal.values_list("message", flat=True))


@pytest.mark.slow
def test_a_start_that_fails_while_another_waits_frees_the_host_for_it(crowded, settings):
    host, starting, waiting = crowded
    settings.CORRAL_PENDING_WAIT = 60
    settings.CORRAL_JOB_HEARTBEAT_INTERVAL = 0.5
    settings.CORRAL_JOB_HEARTBEAT_TIMEOUT = 10
    job, thread = _start_in_thread(waiting)
    wait_until(lambda: Job.objects.get(pk=job.pk).step == "Choosing a host", timeout=30)
    time.sleep(1.5)  # let its first decision find no host (no sign of it until the retry)

    # The starting VM's worker is gone: the reaper fails its start and the VM is Down again.
    stuck = Job.objects.get(vm=starting, state=JobState.RUNNING)
    Job.objects.filter(pk=stuck.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=1))
    assert jobs.reap() == [stuck.pk]
    thread.join(60)

    done = Job.objects.get(pk=job.pk)
    assert (done.state, done.error_message) == (JobState.SUCCEEDED, "")
    assert RETRY in _journal(done)
    assert VirtualMachine.objects.get(pk=starting.pk).status == VmStatus.DOWN
    started = VirtualMachine.objects.get(pk=waiting.pk)
    assert (started.status, started.host_id) == (VmStatus.UP, host.pk)


@pytest.mark.slow
def test_when_nothing_frees_up_the_start_fails_after_one_retry_saying_why(crowded, settings):
    host, starting, waiting = crowded
    settings.CORRAL_PENDING_WAIT = 2
    began = time.monotonic()
    job, thread = _start_in_thread(waiting)
    thread.join(60)

    done = Job.objects.get(pk=job.pk)
    assert (done.state, done.error_code) == (JobState.FAILED, "no_host")
    assert done.error_message.startswith(f"No host can run {waiting.name} in cluster")
    assert f"{host.name}: " in done.error_message
    assert "MiB needed (Memory)" in done.error_message
    assert _journal(done).count(RETRY) == 1
    assert time.monotonic() - began >= 2
    assert VirtualMachine.objects.get(pk=waiting.pk).status == VmStatus.DOWN
    assert VirtualMachine.objects.get(pk=starting.pk).status == VmStatus.STARTING
