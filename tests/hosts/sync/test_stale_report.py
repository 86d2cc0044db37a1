"""A host report read before a job changed a VM must not undo what the job did.

The sync reads a host, then writes what changed. A job that ends on one of the host's VMs in
between (a stop right after the read) leaves the report describing the VM as it was before:
following it would bring back a stopped VM as Up, with an alert about a change "outside
Corral" that never happened.
"""

import pytest

from hosts import driver, jobs, sync
from hosts.models import Job, JobKind
from hosts.operations import OPERATION_BY_KIND
from project.models import Event, EventKind


def _alerts() -> list[str]:
    return list(Event.objects.filter(kind=EventKind.ALERT).values_list("message", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_report_read_before_a_vm_was_stopped_leaves_it_down_without_an_alert(running_vm):
    vm = running_vm()
    report = driver.host_report(vm.host.uri)
    assert {d.uuid: d.power_state for d in report.domains}[str(vm.uuid)] == "running"
    job = jobs.submit(JobKind.POWEROFF, vm=vm)
    assert jobs.run(job.pk, OPERATION_BY_KIND) == "succeeded", Job.objects.get(
        pk=job.pk
    ).error_message

    sync.apply_report(vm.host_id, report)

    vm.refresh_from_db()
    assert (vm.status, _alerts()) == ("down", [])


@pytest.mark.django_db(transaction=True)
def test_the_next_report_is_followed_again(running_vm):
    vm = running_vm()
    stale = driver.host_report(vm.host.uri)
    job = jobs.submit(JobKind.POWEROFF, vm=vm)
    assert jobs.run(job.pk, OPERATION_BY_KIND) == "succeeded", Job.objects.get(
        pk=job.pk
    ).error_message
    sync.apply_report(vm.host_id, stale)

    # Started again behind Corral's back: a report read after the job ended is followed.
    driver.start(vm.host.uri, str(vm.uuid))
    sync.sync_host(vm.host_id)

    vm.refresh_from_db()
    assert (vm.status, vm.power_state) == ("up", "running")
    assert _alerts() == [f"VM {vm.name} started outside Corral"]
