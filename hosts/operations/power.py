"""Power operations: start (placing the VM on a host first), shut down, power off, suspend,
resume."""

from __future__ import annotations

from django.conf import settings

from hosts import driver
from hosts.error_codes import JobErrorCode
from hosts.guests import cloudinit, keys
from hosts.jobs import JobContext, JobFailed
from hosts.models import Host, VirtualMachine, VmStatus
from hosts.operations import disks
from hosts.operations.common import (
    BASE_SNAPSHOT,
    RUNNING,
    STOPPED,
    Attempts,
    clear_from,
    current_state,
    host_call,
    place_vm,
    run_event_hooks,
    set_status,
    spec_for,
    wait_for,
)


def start(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    state = current_state(vm)
    if vm.host is not None and state in RUNNING:
        ctx.log(f"Already running on {vm.host.name}")
        return {"host": vm.host.name, "already": True}
    if state == "paused":
        # Creating a domain that is paused does nothing: starting it means resuming it.
        return _resume_paused(ctx, vm)
    if vm.reservation_id is not None and vm.reservation.lease.status != "ACTIVE":
        lease = vm.reservation.lease
        raise JobFailed(
            JobErrorCode.LEASE_NOT_ACTIVE,
            f"Lease {lease.name} is {lease.status.lower()}; its VMs run only from "
            f"{lease.start_date:%Y-%m-%d %H:%M} to {lease.end_date:%Y-%m-%d %H:%M}.",
        )
    run_event_hooks(ctx, "vm-pre-start", 0.05)
    ctx.step("Choosing a host", 0.15)
    attempts = Attempts(ctx, "Starting")
    defined_on = vm.host  # where the stopped VM's definition (and snapshots) is
    # A VM's snapshots are in its disk on that host: it starts there or not at all.
    pinned = defined_on if defined_on is not None and vm.snapshots.exists() else None
    if pinned is not None:
        ctx.log(f"Its snapshots are on {pinned.name}: it starts there")
    while True:
        chosen = attempts.placing(
            lambda: place_vm(
                ctx,
                vm,
                lambda target: set_status(vm, VmStatus.STARTING, host=target),
                exclude=attempts.failed,
                only=pinned,
            )
        )
        host, explanation = chosen.host, chosen.explanation
        ctx.log(f"Placed on {host.name} (order: {', '.join(explanation.get('order', []))})")
        moved = False
        try:
            if defined_on is not None and defined_on.pk != host.pk:
                ctx.step(f"Moving the stopped VM from {defined_on.name} to {host.name}", 0.25)
                _move_stopped(ctx, vm, defined_on, host)
                moved = True
            _start_on(ctx, vm, host)
        except JobFailed as exc:
            # That host failed (a libvirt error there): the VM must not stay on it.
            if clear_from(ctx, vm, host):
                defined_on = None if (moved or defined_on == host) else defined_on
            elif moved:
                defined_on = host
            attempts.failed_on(host, exc)
            continue
        attempts.succeeded(host)
        break
    if keys.after_start(vm) is not None:
        ctx.log("Its holder's SSH keys go into the guest next (a job of its own)")
    run_event_hooks(ctx, "vm-post-start", 0.9)
    return {"host": host.name, "placement": explanation, "attempts": attempts.tried}


def _start_on(ctx: JobContext, vm: VirtualMachine, host: Host) -> None:
    """Define, (snapshot,) start the VM on ``host`` and wait until it runs there."""
    boot = disks.boot_for(ctx, vm, host)
    ctx.step("Writing the cloud-init seed", 0.3)
    if not host_call(cloudinit.write_seed, vm):
        ctx.log(f"{host.name} has no storage pool for a cloud-init seed; the VM boots without")
    ctx.step(f"Defining the VM on {host.name}", 0.35)
    host_call(driver.define, host.uri, spec_for(vm, **boot))
    # A real disk is reverted by recreating its overlay, not by an internal snapshot.
    if (
        not boot
        and _needs_base_snapshot(vm)
        and not host_call(driver.has_snapshot, host.uri, str(vm.uuid), BASE_SNAPSHOT)
    ):
        ctx.step("Taking the base snapshot", 0.45)
        host_call(driver.snapshot_create, host.uri, str(vm.uuid), BASE_SNAPSHOT)
    ctx.step("Starting the VM", 0.55)
    host_call(driver.start, host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to run", 0.75)
    wait_for(ctx, host, RUNNING, STOPPED, "starting")


def _resume_paused(ctx: JobContext, vm: VirtualMachine) -> dict:
    set_status(vm, VmStatus.RESUMING)
    ctx.step(f"Resuming the paused VM on {vm.host.name}", 0.4)
    host_call(driver.resume, vm.host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to run", 0.7)
    wait_for(ctx, vm.host, RUNNING, STOPPED, "resuming")
    return {"host": vm.host.name, "resumed": True}


def _needs_base_snapshot(vm: VirtualMachine) -> bool:
    """A VM of a stateless pool must have its base snapshot before it first runs."""
    return vm.pool_id is not None and vm.pool.stateless


def _move_stopped(ctx: JobContext, vm: VirtualMachine, source: Host, destination: Host) -> None:
    """A stopped VM defined on an unusable host: move its definition (and snapshots) over;
    between hosts keeping disks in pools, its disk too, or over storage both share, nothing
    but its definition (see ``_move_disk``)."""
    try:
        exists = driver.domain_power_state(source.uri, str(vm.uuid)) is not None
    except driver.DriverError:
        ctx.log(f"{source.name} is unreachable; defining the VM afresh on {destination.name}")
        return
    if not exists:
        return
    if disks.real_storage(source) and disks.real_storage(destination):
        _move_disk(ctx, vm, source, destination)
    else:
        address = destination.migration_target
        host_call(driver.migrate, source.uri, destination.uri, str(vm.uuid), address)


def _move_disk(ctx: JobContext, vm: VirtualMachine, source: Host, destination: Host) -> None:
    """A stateless pool's VM no user holds (or one that never wrote a disk) gets a new overlay
    over the base on the destination; any other VM keeps its overlay: left where it is over
    storage the two hosts share (the VM is only undefined on the source, the start defines it
    on the destination), else copied there with the domain (a paused migration), a held
    stateless one's too (it reverts only when returned). Then the source keeps nothing of the
    VM but what it shares with the destination."""
    uuid = str(vm.uuid)
    has_disk = host_call(driver.volume_path, source.uri, source.storage_pool, disks.disk_name(vm))
    if has_disk and not (_needs_base_snapshot(vm) and vm.owner_id is None):
        if disks.storage_shared(ctx, source, destination):
            host_call(driver.undefine, source.uri, uuid)
            return
        host_call(cloudinit.write_seed_on, destination, vm)
        boot = disks.boot_for(ctx, vm, destination, disk="afresh")
        disks.carry_log(vm, source, destination)
        ctx.step(f"Copying the VM's disk from {source.name} to {destination.name}", 0.27)
        address = destination.migration_target
        host_call(
            lambda: driver.move_stopped_with_storage(
                source.uri, destination.uri, uuid, boot, address
            )
        )
        ctx.log(f"Moved the VM's disk from {source.name} to {destination.name}")
    else:
        host_call(driver.undefine, source.uri, uuid)
        ctx.log(f"The VM's disk is made afresh from its base on {destination.name}")
    disks.remove_disk(ctx, vm, source)
    host_call(driver.remove_guest_files, source.uri, uuid, source.storage_pool)


def _stop(ctx: JobContext, how: str) -> dict:
    vm = ctx.refresh_vm()
    state = current_state(vm)
    if state is None or state in STOPPED:
        ctx.log("Already stopped")
        return {"already": True}
    run_event_hooks(ctx, "vm-pre-stop", 0.05)
    set_status(vm, VmStatus.STOPPING)
    host = vm.host
    result = {"host": host.name}
    if how == "shutdown":
        if shut_down_on(ctx, vm, host, 0.3):
            result["powered_off"] = True
    else:
        ctx.step("Powering off", 0.3)
        _power_off(ctx, vm, host, 0.6)
    run_event_hooks(ctx, "vm-post-stop", 0.9)
    return result


def shut_down_on(ctx: JobContext, vm: VirtualMachine, host: Host, progress: float) -> bool:
    """Ask the guest to shut down and wait for it; past ``CORRAL_SHUTDOWN_TIMEOUT``, power it
    off (clean first, then hard: XAPI's clean_shutdown, then hard_shutdown). True when it had
    to be powered off. Its steps from ``progress`` up to ``progress`` + 0.4."""
    ctx.step("Asking the guest to shut down", progress)
    host_call(driver.shutdown, host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to stop", progress + 0.2)
    limit = settings.CORRAL_SHUTDOWN_TIMEOUT
    if wait_for(ctx, host, STOPPED, set(), "shutting down", timeout=limit) is not None:
        return False
    ctx.step(f"The guest did not shut down within {limit:g} s: powering off", progress + 0.3)
    _power_off(ctx, vm, host, progress + 0.4)
    return True


def _power_off(ctx: JobContext, vm: VirtualMachine, host: Host, progress: float) -> None:
    host_call(driver.power_off, host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to stop", progress)
    wait_for(ctx, host, STOPPED, set(), "stopping")


def shutdown(ctx: JobContext) -> dict:
    return _stop(ctx, "shutdown")


def poweroff(ctx: JobContext) -> dict:
    return _stop(ctx, "poweroff")


def suspend(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    state = current_state(vm)
    if state == "paused":
        return {"already": True}
    if state not in RUNNING:
        raise JobFailed(
            JobErrorCode.NOT_RUNNING, f"VM {vm.name} is not running, so it cannot be suspended."
        )
    set_status(vm, VmStatus.SUSPENDING)
    ctx.step("Suspending", 0.4)
    host_call(driver.suspend, vm.host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to pause", 0.7)
    wait_for(ctx, vm.host, {"paused"}, STOPPED, "suspending")
    return {"host": vm.host.name}


def resume(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    state = current_state(vm)
    if state in RUNNING:
        return {"already": True}
    if state != "paused":
        raise JobFailed(
            JobErrorCode.NOT_PAUSED, f"VM {vm.name} is not suspended, so it cannot be resumed."
        )
    set_status(vm, VmStatus.RESUMING)
    ctx.step("Resuming", 0.4)
    host_call(driver.resume, vm.host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to run", 0.7)
    wait_for(ctx, vm.host, RUNNING, STOPPED, "resuming")
    return {"host": vm.host.name}
