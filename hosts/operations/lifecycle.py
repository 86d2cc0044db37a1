"""A VM's life outside power: prepare (define it and take its base snapshot), revert to that
snapshot, delete; and the no-op job that measures the runner."""

from __future__ import annotations

import time

from django.db import transaction

from hosts import driver
from hosts.error_codes import JobErrorCode
from hosts.jobs import JobContext, JobFailed
from hosts.models import Host, VirtualMachine
from hosts.operations import disks
from hosts.operations.common import (
    BASE_SNAPSHOT,
    STOPPED,
    current_state,
    host_call,
    place_vm,
    spec_for,
)


def delete(ctx: JobContext) -> dict:
    """Remove the VM's domain from its host, then the VM itself (it must be stopped)."""
    vm = ctx.refresh_vm()
    state = current_state(vm)
    if state is not None and state not in STOPPED:
        raise JobFailed(
            JobErrorCode.NOT_STOPPED, f"VM {vm.name} is {state}; stop it before deleting it."
        )
    if vm.host is not None:
        ctx.step(f"Removing the VM from {vm.host.name}", 0.4)
        host_call(driver.undefine, vm.host.uri, str(vm.uuid))
        ctx.step(f"Deleting the VM's disk on {vm.host.name}", 0.6)
        disks.remove_disk(ctx, vm, vm.host)
        host_call(driver.remove_guest_files, vm.host.uri, str(vm.uuid), vm.host.storage_pool)
    ctx.step("Deleting the VM", 0.8)
    name = vm.name
    with transaction.atomic():
        VirtualMachine.objects.filter(pk=vm.pk).delete()
    return {"deleted": name}


def prepare(ctx: JobContext) -> dict:
    """Define a stopped VM on a host and take its base snapshot (while it is shut off)."""
    vm = ctx.refresh_vm()
    if vm.host is None:
        ctx.step("Choosing a host", 0.2)
        vm.host = place_vm(ctx, vm, lambda host: _define_on(vm, host)).host
    state = current_state(vm)
    if state is not None and state not in STOPPED:
        raise JobFailed(
            JobErrorCode.NOT_STOPPED, f"VM {vm.name} is {state}; a base snapshot needs it off."
        )
    boot = disks.boot_for(ctx, vm, vm.host)
    ctx.step(f"Defining the VM on {vm.host.name}", 0.5)
    host_call(driver.define, vm.host.uri, spec_for(vm, **boot))
    if boot:
        return {"host": vm.host.name, "disk": boot["disk_path"]}
    ctx.step("Taking the base snapshot", 0.8)
    host_call(driver.snapshot_create, vm.host.uri, str(vm.uuid), BASE_SNAPSHOT)
    return {"host": vm.host.name, "snapshot": BASE_SNAPSHOT}


def _define_on(vm: VirtualMachine, host: Host) -> None:
    VirtualMachine.objects.filter(pk=vm.pk).update(host=host)


def revert(ctx: JobContext) -> dict:
    """Bring a stopped VM back to its base snapshot (stateless pools, on every return)."""
    vm = ctx.refresh_vm()
    if vm.host is None:
        return {"already": True}
    state = current_state(vm)
    if state is not None and state not in STOPPED:
        raise JobFailed(
            JobErrorCode.NOT_STOPPED, f"VM {vm.name} is {state}; stop it before reverting it."
        )
    if disks.real_storage(vm.host):
        boot = disks.reset_disk(ctx, vm)
        host_call(driver.define, vm.host.uri, spec_for(vm, **boot))
        return {"host": vm.host.name, "disk": boot["disk_path"]}
    ctx.step("Reverting to the base snapshot", 0.5)
    try:
        host_call(driver.snapshot_revert, vm.host.uri, str(vm.uuid), BASE_SNAPSHOT)
    except JobFailed as exc:
        if exc.code != JobErrorCode.DOMAIN_NOT_FOUND:
            raise
        ctx.log("No base snapshot on the host: defining the VM afresh and taking one")
        host_call(driver.define, vm.host.uri, spec_for(vm))
        host_call(driver.snapshot_create, vm.host.uri, str(vm.uuid), BASE_SNAPSHOT)
    return {"host": vm.host.name, "snapshot": BASE_SNAPSHOT}


def noop(ctx: JobContext) -> dict:
    """Steps that do nothing (or sleep): measures the runner and exercises cancel."""
    steps = int(ctx.job.params.get("steps", 3))
    pause = float(ctx.job.params.get("sleep", 0))
    for index in range(steps):
        ctx.step(f"Step {index + 1} of {steps}", index / steps)
        if pause:
            time.sleep(pause)
    return {"steps": steps}
