"""Every status a VM may show is one it takes: the transitional ones (Starting, Stopping,
Suspending, Resuming, Migrating) while the job that moves it runs, the stationary ones (Down,
Up, Paused, Unknown) from what its host reports. Read from the event feed, which carries each
status change (and, for Unknown, the VM as the sync leaves it), over a real VM's life on
simulated hosts."""

import pytest

from hosts import jobs, sync
from hosts.models import Host, JobKind, VirtualMachine, VmStatus
from hosts.operations import OPERATION_BY_KIND
from project.models import Event

pytestmark = pytest.mark.django_db(transaction=True)


def _run(kind: str, vm: VirtualMachine, **params) -> None:
    job = jobs.submit(kind, vm=vm, params=params)
    assert jobs.run(job.pk, OPERATION_BY_KIND) == "succeeded", job.kind


def test_a_vm_takes_every_status_the_api_offers(sim_vm, sim_hosts):
    vm = sim_vm()

    _run(JobKind.START, vm)
    _run(JobKind.SUSPEND, vm)
    _run(JobKind.RESUME, vm)
    vm.refresh_from_db()
    destination = next(host for host in sim_hosts if host.pk != vm.host_id)
    _run(JobKind.MIGRATE, vm, host=destination.pk)
    _run(JobKind.POWEROFF, vm)
    _run(JobKind.START, vm)
    # Its host stops answering: the VM is Unknown, never Down.
    vm.refresh_from_db()
    Host.objects.filter(pk=vm.host_id).update(
        uri="test+unix:///default?socket=/nonexistent/corral/libvirt-sock"
    )
    sync.sync_host(vm.host_id)

    seen = {
        event.data["status"]
        for event in Event.objects.filter(object_type="vm", object_id=vm.pk)
        if "status" in event.data
    }
    seen.add(VirtualMachine.objects.get(pk=vm.pk).status)  # the sync marks it in bulk
    assert seen == set(VmStatus.values)
