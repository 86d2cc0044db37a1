"""What the hosts themselves report, set against what Corral's database says, for the fault
scenarios (tests and the soak): after a fault settles, every VM must be what its host says it is."""

from __future__ import annotations

from dataclasses import dataclass

from hosts import driver
from hosts.models import STATIONARY_STATUSES, Host, Job, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.sync import status_for


@dataclass
class HostView:
    """Each reachable host's domains (uuid -> raw power state); unreachable hosts apart."""

    domains: dict[int, dict[str, str]]
    unreachable: set[int]

    def where(self, vm: VirtualMachine) -> dict[int, str]:
        """Host id -> power state, for every reachable host that has the VM's domain."""
        uuid = str(vm.uuid)
        return {host: found[uuid] for host, found in self.domains.items() if uuid in found}


def look(hosts) -> HostView:
    """Ask every host (one report each), as an administrator would check by hand."""
    domains, unreachable = {}, set()
    for host in hosts:
        try:
            report = driver.host_report(host.uri)
        except driver.DriverError:
            unreachable.add(host.pk)
            continue
        domains[host.pk] = {d.uuid: d.power_state for d in report.domains}
    return HostView(domains=domains, unreachable=unreachable)


def disagreements(vms, hosts=None) -> list[str]:
    """Every way the VMs' rows differ from what the hosts report; empty when they agree.

    A VM must be in a stationary status; on a reachable host, defined there (and nowhere
    else) with the status its power state means; Unknown only on an unreachable host; with
    no host, Down and defined nowhere.
    """
    vms = list(VirtualMachine.objects.filter(pk__in=[vm.pk for vm in vms]).order_by("pk"))
    view = look(hosts if hosts is not None else Host.objects.order_by("pk"))
    wrong = []
    for vm in vms:
        where = view.where(vm)
        seen = f"{vm.name}: {vm.status} on host {vm.host_id}, hosts report {where}"
        if vm.status not in STATIONARY_STATUSES:
            wrong.append(f"{seen} (not stationary)")
        elif vm.host_id in view.unreachable:
            if vm.status != VmStatus.UNKNOWN:
                wrong.append(f"{seen} (its host is unreachable)")
        elif vm.host_id is None:
            if vm.status != VmStatus.DOWN or where:
                wrong.append(seen)
        elif set(where) != {vm.host_id} or vm.status != status_for(where[vm.host_id]):
            wrong.append(seen)
    return wrong


def active_jobs(vms) -> list[str]:
    """The jobs on these VMs still pending or running, as (id, kind, state, VM) text."""
    return [
        f"{job.pk} {job.kind} {job.state} vm={job.vm_id} step={job.step!r}"
        for job in Job.objects.filter(
            vm_id__in=[vm.pk for vm in vms], state__in=ACTIVE_JOB_STATES
        ).order_by("pk")
    ]
