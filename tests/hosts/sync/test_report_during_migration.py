"""A host report read before a migration moved a VM, applied while the migration job still
runs, must not move the VM back to where it was: the job decides where a migrating VM is."""

import pytest

from hosts import driver, jobs, sync
from hosts.models import Job, JobKind, VirtualMachine
from project.models import Event, EventKind
from tests.conftest import wait_until


@pytest.fixture
def held_migration(transactional_db, running_vm, hooks_dir, settings, tmp_path, job_in_thread):
    """A running VM and its source host's report read just before a migration job moved it;
    the job is held in its vm-post-migrate hook until ``release()``.

    Yields (vm, stale report, release); the domain runs on the destination meanwhile.
    """
    settings.CORRAL_HOOK_TIMEOUT = 15
    flag = tmp_path / "release"
    hooks_dir("vm-post-migrate", "50-hold", f"while [ ! -e {flag} ]; do sleep 0.05; done")
    vm = running_vm()
    stale = driver.host_report(vm.host.uri)
    job = jobs.submit(JobKind.MIGRATE, vm=vm)
    worker = job_in_thread(job)
    wait_until(lambda: Job.objects.get(pk=job.pk).step == "Running vm-post-migrate hooks")

    def release() -> Job:
        flag.touch()
        worker.join(15)
        return Job.objects.get(pk=job.pk)

    yield vm, stale, release
    flag.touch()


def test_a_report_read_before_a_migration_does_not_move_the_vm_back(held_migration):
    vm, stale, release = held_migration
    during = VirtualMachine.objects.get(pk=vm.pk)
    assert (during.status, during.host_id != vm.host_id) == ("migrating", True)

    sync.apply_report(vm.host_id, stale)

    after = VirtualMachine.objects.get(pk=vm.pk)
    assert (after.status, after.host_id) == ("migrating", during.host_id)
    assert not Event.objects.filter(kind=EventKind.ALERT).exists()
    assert release().state == "succeeded"
    landed = VirtualMachine.objects.get(pk=vm.pk)
    assert (landed.status, landed.host_id) == ("up", during.host_id)
    assert driver.domain_power_state(landed.host.uri, str(vm.uuid)) == "running"
