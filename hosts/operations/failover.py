"""Failover: a host confirmed down (``hosts.services.confirm_down``) has its VMs set Down, and
those that ran there and are highly available (or whose cluster restarts VMs elsewhere)
started on other hosts by start jobs, through the scheduler; the others stay Down."""

from __future__ import annotations

from django.db import transaction

from hosts import jobs
from hosts.error_codes import JobErrorCode
from hosts.jobs import JobContext, JobFailed
from hosts.models import HostStatus, JobKind, PowerState, VirtualMachine, VmStatus
from hosts.models.jobs import RUNNING_JOB_STATES
from hosts.sync.reconcile import announce_stop, vm_changed


def failover(ctx: JobContext) -> dict:
    host = ctx.job.host
    host.refresh_from_db()
    if host.status != HostStatus.NON_RESPONSIVE or host.confirmed_down_at is None:
        raise JobFailed(
            JobErrorCode.HOST_NOT_DOWN,
            f"Host {host.name} is {host.get_status_display()} and not confirmed down: its VMs "
            "are left where they are.",
        )
    if host.confirmed_down_by:
        how = "fenced" if ctx.job.params.get("fenced") else "confirmed down"
        ctx.log(f"Host {host.name} was {how} by {host.confirmed_down_by}")
    ctx.step(f"Setting the VMs of {host.name} Down", 0.2)
    vms = list(VirtualMachine.objects.filter(host=host).select_related("cluster").order_by("pk"))
    busy = set(
        VirtualMachine.objects.filter(
            pk__in=[vm.pk for vm in vms], jobs__state__in=RUNNING_JOB_STATES
        ).values_list("pk", flat=True)
    )
    restarted, left = [], []
    for vm in vms:
        if vm.pk in busy:
            ctx.log(f"VM {vm.name} has a running job: left to it")
            continue
        again = vm.running_when_lost and (vm.highly_available or vm.cluster.restart_elsewhere)
        with transaction.atomic():
            done = VirtualMachine.objects.filter(pk=vm.pk, host=host).update(
                host=None,
                migrating_to=None,
                status=VmStatus.DOWN,
                power_state=PowerState.SHUTOFF,
                power_host=None,
                running_when_lost=False,
            )
            if not done:
                continue  # moved meanwhile
            vm.status, vm.host = VmStatus.DOWN, None
            vm_changed(vm, f"VM {vm.name} is Down: its host {host.name} was confirmed down")
            if again:
                job = jobs.submit(
                    JobKind.START, vm=vm, params={"reason": "failover", "from": host.pk}
                )
            elif vm.running_when_lost:
                announce_stop(vm.pk, with_host=True)
        if again:
            ctx.log(f"VM {vm.name} is highly available: starting it elsewhere (job {job.pk})")
            restarted.append(vm.name)
        else:
            why = "is not highly available" if vm.running_when_lost else "was not running"
            ctx.log(f"VM {vm.name} {why}: left Down")
            left.append(vm.name)
    return {"host": host.name, "restarted": restarted, "left_down": left}
