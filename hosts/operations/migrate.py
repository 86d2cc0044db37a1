"""Live migration: the scheduler chooses the destination (a requested host, the balancer's
candidates, or any host but the current one); the VM may stay when its host is the best."""

from __future__ import annotations

import time

from django.db import transaction

from hosts import driver
from hosts.error_codes import JobErrorCode
from hosts.guests import cloudinit
from hosts.host_choice import NoHostAvailable, decision, place
from hosts.jobs import JobContext, JobFailed
from hosts.models import Host, VirtualMachine, VmStatus
from hosts.models.snapshots import why_it_stays
from hosts.operations import disks
from hosts.operations.common import (
    RUNNING,
    STOPPED,
    Attempts,
    clear_from,
    current_state,
    decided,
    host_call,
    hosts_but,
    refusal,
    run_event_hooks,
    set_status,
    wait_for,
)


def migrate(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    source = vm.host
    # The balancer and maintenance queue migrations without asking: say why it stays.
    if why := why_it_stays(vm, source.name if source else "its host"):
        raise JobFailed(JobErrorCode.HAS_SNAPSHOTS, why)
    state = current_state(vm)
    if state not in RUNNING | {"paused"}:
        raise JobFailed(
            JobErrorCode.NOT_RUNNING, f"VM {vm.name} is not running, so it cannot migrate."
        )
    run_event_hooks(ctx, "vm-pre-migrate", 0.05)
    ctx.step("Choosing the destination", 0.15)
    # A requested host is the only one to try.
    attempts = Attempts(ctx, "Migrating", 1 if ctx.job.params.get("host") is not None else None)
    while True:
        chosen = attempts.placing(lambda: _choose(ctx, vm, source, attempts.failed))
        destination = chosen.host
        if destination.pk == source.pk:
            ctx.log(f"The policy prefers {source.name}: the VM stays")
            return {"stayed": source.name, "placement": chosen.explanation}
        try:
            ssh_port = _move(ctx, vm, source, destination)
            ctx.step(f"Waiting for the VM to run on {destination.name}", 0.8)
            wait_for(ctx, destination, RUNNING | {"paused"}, STOPPED, "migrating")
        except JobFailed as exc:
            if current_state(vm) not in RUNNING | {"paused"}:
                raise  # the VM is no longer on its source: not the destination's failure
            clear_from(ctx, vm, destination)
            set_status(vm, VmStatus.MIGRATING, migrating_to=None)
            attempts.failed_on(destination, exc)
            continue
        attempts.succeeded(destination)
        break
    # Its screen listens on another port there: read it now, so that a console opened right
    # after the move reaches it (the guest-info loop would only read it at its next round).
    graphics_port = _screen_port(destination, vm)
    with transaction.atomic():
        VirtualMachine.objects.filter(pk=vm.pk).update(
            host=destination, migrating_to=None, ssh_port=ssh_port, graphics_port=graphics_port
        )
    vm.host = destination
    vm.ssh_port = ssh_port
    vm.graphics_port = graphics_port
    run_event_hooks(ctx, "vm-post-migrate", 0.9)
    return {
        "from": source.name,
        "to": destination.name,
        "placement": chosen.explanation,
        "attempts": attempts.tried,
    }


def _screen_port(host: Host, vm: VirtualMachine) -> int | None:
    """The VM's VNC port on ``host``; None when it has no screen or it cannot be read now (no
    console is offered until the guest-info loop reads it, rather than the source's port)."""
    try:
        return driver.screen_port(host.uri, str(vm.uuid))
    except driver.DriverError:
        return None


def _choose(ctx: JobContext, vm: VirtualMachine, source: Host, exclude: set[int]):
    """The destination, decided and recorded (the VM Migrating to it) under the scheduling
    lock; the source itself when the policy prefers it."""
    started = time.monotonic()
    try:
        with decision(vm.cluster_id):
            chosen = _destinations(vm, ctx.job.params, exclude)
            if chosen.host.pk == source.pk:
                decided(ctx, chosen.explanation, started, "stayed")
                return chosen
            set_status(vm, VmStatus.MIGRATING, migrating_to=chosen.host)
        decided(ctx, chosen.explanation, started, "placed")
        return chosen
    except NoHostAvailable as exc:
        decided(ctx, exc.explanation, started, refusal(exc))
        raise JobFailed(JobErrorCode.NO_HOST, exc.message, {"placement": exc.explanation}) from exc


def _destinations(vm: VirtualMachine, params: dict, exclude: set[int]):
    """The scheduler's choice for a migration: a requested host, the balancer's candidates
    (the current host included, so staying is possible), or any host but the current one
    (and but those in ``exclude``, which failed this job)."""
    if params.get("host") is not None:
        destination = Host.objects.filter(pk=params["host"], cluster_id=vm.cluster_id).first()
        if destination is None:
            raise JobFailed(
                JobErrorCode.BAD_DESTINATION, "The destination host is not in the VM's cluster."
            )
        if destination.pk == vm.host_id:
            raise JobFailed(
                JobErrorCode.BAD_DESTINATION, f"VM {vm.name} is already on {destination.name}."
            )
        return place(vm, purpose="migrate", hosts=[destination])
    if params.get("candidates"):
        hosts = list(
            Host.objects.filter(
                pk__in=[*params["candidates"], vm.host_id], cluster_id=vm.cluster_id
            )
            .exclude(pk__in=exclude)
            .order_by("pk")
        )
        return place(vm, purpose="balance", hosts=hosts)
    return place(vm, purpose="migrate", hosts=hosts_but(vm, exclude))


def _move(ctx: JobContext, vm: VirtualMachine, source: Host, destination: Host) -> int | None:
    """Move the running VM, its stream sent to the destination's migration address. Between
    hosts keeping disks in pools: over storage both are set to share and show they share, only
    its memory (nothing made on the destination, nothing removed from the source: the disk,
    seed and console log are the files they are); otherwise its disk too (the destination's
    images and overlay prepared first, the source's overlay, seed and console log removed
    after). Returns the destination's port for the guest's SSH, if it publishes one."""
    address = destination.migration_target
    if not (disks.real_storage(source) and disks.real_storage(destination)):
        ctx.step(f"Migrating from {source.name} to {destination.name}", 0.3)
        host_call(driver.migrate, source.uri, destination.uri, str(vm.uuid), address)
        return None
    if disks.storage_shared(ctx, source, destination):
        boot = disks.boot_for(ctx, vm, destination, disk="existing")
        ctx.step(f"Migrating from {source.name} to {destination.name}", 0.5)
        host_call(
            lambda: driver.migrate_with_storage(
                source.uri, destination.uri, str(vm.uuid), boot, address, copy_disk=False
            )
        )
        return boot.get("ssh_forward_port")
    # Read-only CD-ROMs are not copied by a migration: the seed must be there first.
    host_call(cloudinit.write_seed_on, destination, vm)
    boot = disks.boot_for(ctx, vm, destination, disk="afresh")
    disks.carry_log(vm, source, destination)
    ctx.step(f"Migrating from {source.name} to {destination.name} with its disk", 0.5)
    host_call(
        lambda: driver.migrate_with_storage(
            source.uri, destination.uri, str(vm.uuid), boot, address
        )
    )
    disks.remove_disk(ctx, vm, source)
    host_call(driver.remove_guest_files, source.uri, str(vm.uuid), source.storage_pool)
    return boot.get("ssh_forward_port")
