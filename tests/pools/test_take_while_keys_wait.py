"""Taking a prestarted VM while the job putting SSH keys in its guest waits for the guest's agent,
on a real QEMU host: the guest boots nothing (a blank disk), so its agent never answers and the
keys job started after its start would wait CORRAL_GUEST_KEYS_WAIT (90 s) for it. The VM is
handed out at once all the same, the waiting job stops within moments, and the new holder's
own keys job is next. Jobs run in this process, as task workers would run them."""

import pytest

from hosts import jobs
from hosts.models import Job, JobKind, JobState, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import wait_until
from tests.pools.fixtures import add_pool_vms

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_vm_is_taken_at_once_while_its_keys_job_waits_and_its_holders_keys_come_next(
    ssh_lab_host, make_template, make_pool, pool_user, client_for, job_in_thread, settings
):
    template = make_template(
        memory_mb=128, vcpus=1, disk_gb=1, login_user="corral", guest_agent=True
    )
    pool = make_pool(cluster=ssh_lab_host.cluster, template=template, size=1, prestarted_vms=1)
    [vm] = add_pool_vms(pool, [VmStatus.DOWN])
    started = jobs.submit(JobKind.START, vm=vm)
    assert jobs.run(started.pk, OPERATION_BY_KIND) == JobState.SUCCEEDED
    [waiting] = Job.objects.filter(vm=vm, kind=JobKind.GUEST_KEYS)
    worker = job_in_thread(waiting)
    wait_until(
        lambda: Job.objects.get(pk=waiting.pk).step.startswith("Taking the last holder's SSH keys"),
        message="the keys job never began waiting for the agent",
    )
    user = pool_user(pool)

    taken = client_for(user).post(f"/api/vmpools/{pool.pk}/allocatevm/")

    assert taken.status_code == 200, taken.content
    assert (taken.json()["vm"]["id"], taken.json()["instant"]) == (vm.pk, True)
    worker.join(15)  # far less than the 90 s it would have waited
    assert worker.outcome == JobState.CANCELLED
    [following] = Job.objects.filter(vm=vm, state__in=ACTIVE_JOB_STATES)
    assert (following.kind, following.state, following.requested_by) == (
        JobKind.GUEST_KEYS,
        JobState.PENDING,
        user,
    )
    settings.CORRAL_GUEST_KEYS_WAIT = 1  # the agent never answers: say so soon
    # The keys are not in the guest, and the job says so as the VM does, for its new holder.
    assert jobs.run(following.pk, OPERATION_BY_KIND) == JobState.FAILED
    vm.refresh_from_db()
    assert vm.guest_keys_of == user.pk
    assert vm.guest_keys_note.startswith("The guest agent did not answer within 1 s")
