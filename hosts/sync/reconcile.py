"""A VM's lifecycle status from its power state: the table that maps one to the other, the
event a change of status makes, and asking a host about one VM (after a job)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from hosts import driver
from hosts.models import Host, HostStatus, PowerState, VirtualMachine, VmStatus
from hosts.signals import vm_stopped
from project import events
from project.models import EventKind

# Statuses of a VM that runs (or is on its way down): reaching Down from one is a stop.
RUNNING_STATUSES = {
    VmStatus.UP,
    VmStatus.PAUSED,
    VmStatus.STOPPING,
    VmStatus.SUSPENDING,
    VmStatus.RESUMING,
    VmStatus.MIGRATING,
}

STATUS_FOR_POWER = {
    PowerState.RUNNING: VmStatus.UP,
    PowerState.BLOCKED: VmStatus.UP,
    PowerState.SHUTDOWN: VmStatus.UP,  # shutting down, still running until it is off
    PowerState.PAUSED: VmStatus.PAUSED,
    PowerState.PMSUSPENDED: VmStatus.PAUSED,
    PowerState.SHUTOFF: VmStatus.DOWN,
    PowerState.CRASHED: VmStatus.DOWN,
    PowerState.NOSTATE: VmStatus.DOWN,
    PowerState.REPORT_MISSING: VmStatus.DOWN,
    PowerState.UNKNOWN: VmStatus.UNKNOWN,
}


def status_for(power_state: str | None) -> str:
    """The stationary status of a VM whose host reports ``power_state`` (None: no domain)."""
    if power_state is None:
        return VmStatus.DOWN
    return STATUS_FOR_POWER.get(power_state, VmStatus.UNKNOWN)


def vm_scope(vm: VirtualMachine) -> dict:
    return {"vm_id": vm.pk, "cluster_id": vm.cluster_id, "pool_id": vm.pool_id}


def vm_changed(vm: VirtualMachine, message: str) -> None:
    """A change of the VM's status in the event feed."""
    events.emit(
        EventKind.CHANGED,
        "vm",
        vm.pk,
        message,
        {"status": vm.status, "power_state": vm.power_state, "host": vm.host_id},
        **vm_scope(vm),
    )


def announce_stop(vm_id: int, *, with_host: bool = False) -> None:
    """Tell the apps above (``vm_stopped``) once the stop is committed; ``with_host``: the VM
    stopped with its host (a host restart or failure), not by anyone's hand."""
    transaction.on_commit(
        lambda: vm_stopped.send(sender=VirtualMachine, vm_id=vm_id, with_host=with_host)
    )


def find_elsewhere(vm: VirtualMachine, missing_on: Host) -> tuple[Host, str] | None:
    """(host, power state) of another Up host of the VM's cluster that has its domain (by
    UUID), one libvirt call per host; None when none has it. Only asked when a VM's own host
    has no such domain, so the cost is paid on that rare path alone."""
    others = (
        Host.objects.filter(cluster_id=vm.cluster_id, status=HostStatus.UP)
        .exclude(pk=missing_on.pk)
        .order_by("pk")
    )
    for other in others:
        try:
            state = driver.domain_power_state(other.uri, str(vm.uuid))
        except driver.DriverError:
            continue
        if state is not None:
            return other, state
    return None


def reconcile_vm(vm_id: int) -> VirtualMachine:
    """Ask the VM's host what state it is in, and set the VM's stationary status from that."""
    with transaction.atomic():
        vm = (
            VirtualMachine.objects.select_for_update(of=("self",))
            .select_related("host")
            .get(pk=vm_id)
        )
        host = vm.host
        if host is None:
            state = None
        else:
            try:
                state = driver.domain_power_state(host.uri, str(vm.uuid))
            except driver.DriverError:
                state = PowerState.UNKNOWN
        if host is not None and state is None:
            # Gone from its host: moved outside Corral (during a migration, say) to another
            # host of the cluster? Then it is followed there, never taken for Down.
            found = find_elsewhere(vm, host)
            if found is not None:
                previous, (host, state) = host, found
                vm.host = host
                message = (
                    f"VM {vm.name} is running on {host.name}, not {previous.name}: "
                    "moved outside Corral"
                    if state in driver.ACTIVE_STATES
                    else f"VM {vm.name} is defined on {host.name}, not {previous.name}: "
                    "moved outside Corral"
                )
                events.alert("vm", vm.pk, message, **vm_scope(vm))
        now = timezone.now()
        before = vm.status
        vm.status = status_for(state)
        if host is not None:
            vm.power_state = state or PowerState.REPORT_MISSING
            vm.power_host, vm.power_state_update_count, vm.power_state_updated_at = host, 1, now
            if state is None:
                vm.host = None  # no domain on the host: it is defined again when started
        vm.save()
        if vm.status != before:
            vm_changed(vm, f"VM {vm.name} is {vm.get_status_display()}")
            if vm.status == VmStatus.DOWN and before in RUNNING_STATUSES:
                announce_stop(vm.pk)
    return vm
