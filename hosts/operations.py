"""VM operations as small steps (XAPI's micro-ops), run by the job runner.

Each operation moves the VM to a transitional status while it runs, works through its steps
(hooks, placement, libvirt calls, waiting for the host to report the result) and returns a
result. Whatever happens, ``finish_vm`` then sets the VM to the stationary state its host
reports: a failed step never leaves a guess behind; and a job whose VM the host reports other
than it left it (changed outside Corral meanwhile) fails (``changed_outside``).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction

from hosts import driver
from hosts.hooks import HookFailed, hooks_for, run_hooks
from hosts.jobs import JobContext, JobFailed
from hosts.models import Host, JobKind, PowerState, VirtualMachine, VmStatus
from hosts.placement import (
    NoHostAvailable,
    SchedulerBusy,
    decision,
    place,
    wait_for_pending,
)
from hosts.sync import reconcile_vm, vm_changed

POLL_S = 0.1
RUNNING = {"running", "blocked"}
STOPPED = {"shutoff", "crashed"}


def spec_for(vm: VirtualMachine) -> driver.DomainSpec:
    template = vm.template
    return driver.DomainSpec(
        uuid=str(vm.uuid),
        name=vm.name,
        vcpus=vm.vcpus,
        memory_mb=vm.memory_mb,
        disk_gb=vm.disk_gb,
        networks=tuple(template.networks),
        os_type=template.os_type,
    )


def _set_status(vm: VirtualMachine, status: str, **fields) -> None:
    VirtualMachine.objects.filter(pk=vm.pk).update(status=status, **fields)
    vm.status = status
    for name, value in fields.items():
        setattr(vm, name, value)
    vm_changed(vm, f"VM {vm.name} is {vm.get_status_display()}")


def _hooks(ctx: JobContext, event: str, progress: float) -> None:
    if not _has_hooks(event):
        return
    ctx.step(f"Running {event} hooks", progress)
    try:
        run_hooks(
            event, vm_uuid=str(ctx.vm.uuid), vm_id=ctx.vm.pk, reason=ctx.job.kind, log=ctx.log
        )
    except HookFailed as exc:
        raise JobFailed("hook_failed", exc.message) from exc


def _has_hooks(event: str) -> bool:
    return bool(hooks_for(event))


def _call(fn, *args):
    try:
        return fn(*args)
    except driver.HostUnreachable as exc:
        raise JobFailed("host_unreachable", exc.message) from exc
    except driver.DriverError as exc:
        raise JobFailed(exc.code, exc.message) from exc


def _current_state(vm: VirtualMachine) -> str | None:
    if vm.host is None:
        return None
    return _call(driver.domain_power_state, vm.host.uri, str(vm.uuid))


def wait_for(ctx: JobContext, host: Host, wanted: set[str], failing: set[str], what: str) -> str:
    """Poll the host until the VM's state is in ``wanted``; fail fast on ``failing``."""
    deadline = time.monotonic() + settings.CORRAL_TRANSITION_TIMEOUT
    while True:
        state = _call(driver.domain_power_state, host.uri, str(ctx.vm.uuid))
        if state in wanted:
            return state
        if state in failing or state is None:
            raise JobFailed(
                "unexpected_state",
                f"The VM is {state or 'gone'} on {host.name} while {what}; the host decides.",
            )
        if time.monotonic() > deadline:
            raise JobFailed(
                "timeout",
                f"The VM was still {state} on {host.name} after "
                f"{settings.CORRAL_TRANSITION_TIMEOUT:.0f} s while {what}.",
            )
        ctx.check_cancelled()
        time.sleep(POLL_S)


# -- operations ------------------------------------------------------------------------------


def start(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    state = _current_state(vm)
    if vm.host is not None and state in RUNNING:
        ctx.log(f"Already running on {vm.host.name}")
        return {"host": vm.host.name, "already": True}
    if state == "paused":
        # Creating a domain that is paused does nothing: starting it means resuming it.
        return _resume_paused(ctx, vm)
    if vm.reservation_id is not None and vm.reservation.lease.status != "ACTIVE":
        lease = vm.reservation.lease
        raise JobFailed(
            "lease_not_active",
            f"Lease {lease.name} is {lease.status.lower()}; its VMs run only from "
            f"{lease.start_date:%Y-%m-%d %H:%M} to {lease.end_date:%Y-%m-%d %H:%M}.",
        )
    _hooks(ctx, "vm-pre-start", 0.05)
    ctx.step("Choosing a host", 0.15)
    previous = vm.host
    chosen = _place(ctx, vm, lambda host: _set_status(vm, VmStatus.STARTING, host=host))
    host, explanation = chosen.host, chosen.explanation
    ctx.log(f"Placed on {host.name} (order: {', '.join(explanation.get('order', []))})")
    if previous is not None and previous.pk != host.pk:
        ctx.step(f"Moving the stopped VM from {previous.name} to {host.name}", 0.25)
        _move_stopped(ctx, vm, previous, host)
    ctx.step(f"Defining the VM on {host.name}", 0.35)
    _call(driver.define, host.uri, spec_for(vm))
    if _needs_base_snapshot(vm) and not _call(
        driver.has_snapshot, host.uri, str(vm.uuid), BASE_SNAPSHOT
    ):
        ctx.step("Taking the base snapshot", 0.45)
        _call(driver.snapshot_create, host.uri, str(vm.uuid), BASE_SNAPSHOT)
    ctx.step("Starting the VM", 0.55)
    _call(driver.start, host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to run", 0.75)
    wait_for(ctx, host, RUNNING, STOPPED, "starting")
    _hooks(ctx, "vm-post-start", 0.9)
    return {"host": host.name, "placement": explanation}


def _resume_paused(ctx: JobContext, vm: VirtualMachine) -> dict:
    _set_status(vm, VmStatus.RESUMING)
    ctx.step(f"Resuming the paused VM on {vm.host.name}", 0.4)
    _call(driver.resume, vm.host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to run", 0.7)
    wait_for(ctx, vm.host, RUNNING, STOPPED, "resuming")
    return {"host": vm.host.name, "resumed": True}


def _needs_base_snapshot(vm: VirtualMachine) -> bool:
    """A VM of a stateless pool must have its base snapshot before it first runs."""
    return vm.pool_id is not None and vm.pool.stateless


def _place(ctx: JobContext, vm: VirtualMachine, record):
    """Choose a host by the cluster's policy and ``record(host)`` the choice, both under the
    cluster's scheduling lock. When none fits while the cluster is still settling (VMs
    starting, hosts just added), wait for it once and try again."""
    for attempt in (1, 2):
        started = time.monotonic()
        try:
            with decision(vm.cluster_id):
                chosen = place(vm)
                record(chosen.host)
            _decided(ctx, chosen.explanation, started, "placed")
            return chosen
        except NoHostAvailable as exc:
            if attempt == 2 or not wait_for_pending(vm):
                _decided(ctx, exc.explanation, started, _refusal(exc))
                raise JobFailed("no_host", exc.message, {"placement": exc.explanation}) from exc
            ctx.log("No host fitted while the cluster was settling; trying once more")


def _decided(ctx: JobContext, explanation: dict, started: float, outcome: str) -> None:
    """Record a placement decision on the job: how it ended and how long it took (waiting for
    the scheduling lock included), for "why this host" and the scheduler's metrics."""
    explanation["outcome"] = outcome
    explanation["seconds"] = round(time.monotonic() - started, 6)
    ctx.placement = explanation


def _refusal(exc: NoHostAvailable) -> str:
    return "busy" if isinstance(exc, SchedulerBusy) else "no_host"


def _move_stopped(ctx: JobContext, vm: VirtualMachine, source: Host, destination: Host) -> None:
    """A stopped VM defined on an unusable host: move its definition (and snapshots) over."""
    try:
        exists = driver.domain_power_state(source.uri, str(vm.uuid)) is not None
    except driver.DriverError:
        ctx.log(f"{source.name} is unreachable; defining the VM afresh on {destination.name}")
        return
    if exists:
        _call(driver.migrate, source.uri, destination.uri, str(vm.uuid))


def _stop(ctx: JobContext, how: str) -> dict:
    vm = ctx.refresh_vm()
    state = _current_state(vm)
    if state is None or state in STOPPED:
        ctx.log("Already stopped")
        return {"already": True}
    _hooks(ctx, "vm-pre-stop", 0.05)
    _set_status(vm, VmStatus.STOPPING)
    host = vm.host
    if how == "shutdown":
        ctx.step("Asking the guest to shut down", 0.3)
        _call(driver.shutdown, host.uri, str(vm.uuid))
    else:
        ctx.step("Powering off", 0.3)
        _call(driver.power_off, host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to stop", 0.6)
    wait_for(ctx, host, STOPPED, set(), "stopping")
    _hooks(ctx, "vm-post-stop", 0.9)
    return {"host": host.name}


def shutdown(ctx: JobContext) -> dict:
    return _stop(ctx, "shutdown")


def poweroff(ctx: JobContext) -> dict:
    return _stop(ctx, "poweroff")


def suspend(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    state = _current_state(vm)
    if state == "paused":
        return {"already": True}
    if state not in RUNNING:
        raise JobFailed("not_running", f"VM {vm.name} is not running, so it cannot be suspended.")
    _set_status(vm, VmStatus.SUSPENDING)
    ctx.step("Suspending", 0.4)
    _call(driver.suspend, vm.host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to pause", 0.7)
    wait_for(ctx, vm.host, {"paused"}, STOPPED, "suspending")
    return {"host": vm.host.name}


def resume(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    state = _current_state(vm)
    if state in RUNNING:
        return {"already": True}
    if state != "paused":
        raise JobFailed("not_paused", f"VM {vm.name} is not suspended, so it cannot be resumed.")
    _set_status(vm, VmStatus.RESUMING)
    ctx.step("Resuming", 0.4)
    _call(driver.resume, vm.host.uri, str(vm.uuid))
    ctx.step("Waiting for the VM to run", 0.7)
    wait_for(ctx, vm.host, RUNNING, STOPPED, "resuming")
    return {"host": vm.host.name}


def migrate(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    source = vm.host
    state = _current_state(vm)
    if state not in RUNNING | {"paused"}:
        raise JobFailed("not_running", f"VM {vm.name} is not running, so it cannot migrate.")
    _hooks(ctx, "vm-pre-migrate", 0.05)
    ctx.step("Choosing the destination", 0.15)
    started = time.monotonic()
    try:
        with decision(vm.cluster_id):
            chosen = _destinations(vm, ctx.job.params)
            destination = chosen.host
            if destination.pk == source.pk:
                _decided(ctx, chosen.explanation, started, "stayed")
                ctx.log(f"The policy prefers {source.name}: the VM stays")
                return {"stayed": source.name, "placement": chosen.explanation}
            _set_status(vm, VmStatus.MIGRATING, migrating_to=destination)
        _decided(ctx, chosen.explanation, started, "placed")
    except NoHostAvailable as exc:
        _decided(ctx, exc.explanation, started, _refusal(exc))
        raise JobFailed("no_host", exc.message, {"placement": exc.explanation}) from exc
    ctx.step(f"Migrating from {source.name} to {destination.name}", 0.3)
    _call(driver.migrate, source.uri, destination.uri, str(vm.uuid))
    ctx.step(f"Waiting for the VM to run on {destination.name}", 0.8)
    wait_for(ctx, destination, RUNNING | {"paused"}, STOPPED, "migrating")
    with transaction.atomic():
        VirtualMachine.objects.filter(pk=vm.pk).update(host=destination, migrating_to=None)
    vm.host = destination
    _hooks(ctx, "vm-post-migrate", 0.9)
    return {"from": source.name, "to": destination.name, "placement": chosen.explanation}


def _destinations(vm: VirtualMachine, params: dict):
    """The scheduler's choice for a migration: a requested host, the balancer's candidates
    (the current host included, so staying is possible), or any host but the current one."""
    if params.get("host") is not None:
        destination = Host.objects.filter(pk=params["host"], cluster_id=vm.cluster_id).first()
        if destination is None:
            raise JobFailed("bad_destination", "The destination host is not in the VM's cluster.")
        if destination.pk == vm.host_id:
            raise JobFailed("bad_destination", f"VM {vm.name} is already on {destination.name}.")
        return place(vm, purpose="migrate", hosts=[destination])
    if params.get("candidates"):
        hosts = list(
            Host.objects.filter(
                pk__in=[*params["candidates"], vm.host_id], cluster_id=vm.cluster_id
            ).order_by("pk")
        )
        return place(vm, purpose="balance", hosts=hosts)
    return place(vm, purpose="migrate")


def delete(ctx: JobContext) -> dict:
    """Remove the VM's domain from its host, then the VM itself (it must be stopped)."""
    vm = ctx.refresh_vm()
    state = _current_state(vm)
    if state is not None and state not in STOPPED:
        raise JobFailed("not_stopped", f"VM {vm.name} is {state}; stop it before deleting it.")
    if vm.host is not None:
        ctx.step(f"Removing the VM from {vm.host.name}", 0.4)
        _call(driver.undefine, vm.host.uri, str(vm.uuid))
    ctx.step("Deleting the VM", 0.8)
    name = vm.name
    with transaction.atomic():
        VirtualMachine.objects.filter(pk=vm.pk).delete()
    return {"deleted": name}


BASE_SNAPSHOT = "corral-base"


def prepare(ctx: JobContext) -> dict:
    """Define a stopped VM on a host and take its base snapshot (while it is shut off)."""
    vm = ctx.refresh_vm()
    if vm.host is None:
        ctx.step("Choosing a host", 0.2)
        vm.host = _place(ctx, vm, lambda host: _define_on(vm, host)).host
    state = _current_state(vm)
    if state is not None and state not in STOPPED:
        raise JobFailed("not_stopped", f"VM {vm.name} is {state}; a base snapshot needs it off.")
    ctx.step(f"Defining the VM on {vm.host.name}", 0.5)
    _call(driver.define, vm.host.uri, spec_for(vm))
    ctx.step("Taking the base snapshot", 0.8)
    _call(driver.snapshot_create, vm.host.uri, str(vm.uuid), BASE_SNAPSHOT)
    return {"host": vm.host.name, "snapshot": BASE_SNAPSHOT}


def _define_on(vm: VirtualMachine, host: Host) -> None:
    VirtualMachine.objects.filter(pk=vm.pk).update(host=host)


def revert(ctx: JobContext) -> dict:
    """Bring a stopped VM back to its base snapshot (stateless pools, on every return)."""
    vm = ctx.refresh_vm()
    if vm.host is None:
        return {"already": True}
    state = _current_state(vm)
    if state is not None and state not in STOPPED:
        raise JobFailed("not_stopped", f"VM {vm.name} is {state}; stop it before reverting it.")
    ctx.step("Reverting to the base snapshot", 0.5)
    try:
        _call(driver.snapshot_revert, vm.host.uri, str(vm.uuid), BASE_SNAPSHOT)
    except JobFailed as exc:
        if exc.code != "domain_not_found":
            raise
        ctx.log("No base snapshot on the host: defining the VM afresh and taking one")
        _call(driver.define, vm.host.uri, spec_for(vm))
        _call(driver.snapshot_create, vm.host.uri, str(vm.uuid), BASE_SNAPSHOT)
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


OPERATIONS = {
    JobKind.START: start,
    JobKind.SHUTDOWN: shutdown,
    JobKind.POWEROFF: poweroff,
    JobKind.SUSPEND: suspend,
    JobKind.RESUME: resume,
    JobKind.MIGRATE: migrate,
    JobKind.DELETE: delete,
    JobKind.PREPARE: prepare,
    JobKind.REVERT: revert,
    JobKind.NOOP: noop,
}


def finish_vm(vm_id: int, *, succeeded: bool) -> VirtualMachine | None:
    """After a job: the VM takes the stationary state its host reports (never a guess);
    returns it so settled (None when the job deleted it).

    An interrupted migration is resolved by asking both hosts where the domain is.
    """
    vm = VirtualMachine.objects.select_related("host", "migrating_to").filter(pk=vm_id).first()
    if vm is None:
        return None  # deleted by the job
    if vm.migrating_to_id is not None:
        landed = vm.migrating_to
        try:
            there = driver.domain_power_state(landed.uri, str(vm.uuid))
        except driver.DriverError:
            there = None
        fields = {"migrating_to": None}
        if there is not None:
            fields["host"] = landed
        VirtualMachine.objects.filter(pk=vm_id).update(**fields)
    return reconcile_vm(vm_id)


# What the host must report once an operation has succeeded. Anything else is a change made
# outside Corral while the job ran, after its own wait: it contradicts the job, so it fails it.
EXPECTED_STATES = {
    JobKind.START: RUNNING,
    JobKind.RESUME: RUNNING,
    JobKind.SHUTDOWN: STOPPED | {PowerState.REPORT_MISSING},
    JobKind.POWEROFF: STOPPED | {PowerState.REPORT_MISSING},
    JobKind.SUSPEND: {"paused"},
    JobKind.MIGRATE: RUNNING | {"paused"},  # a paused VM migrates paused
}
BEING = {
    JobKind.START: "started",
    JobKind.RESUME: "resumed",
    JobKind.SHUTDOWN: "shut down",
    JobKind.POWEROFF: "powered off",
    JobKind.SUSPEND: "suspended",
    JobKind.MIGRATE: "migrated",
}
HAPPENED = {
    "running": "was started outside Corral",
    "blocked": "was started outside Corral",
    "paused": "was paused outside Corral",
    "pmsuspended": "was paused outside Corral",
    "shutdown": "began shutting down outside Corral",
    "shutoff": "was shut off outside Corral",
    "crashed": "crashed",
    PowerState.REPORT_MISSING: "was removed from its host outside Corral",
}


def changed_outside(kind: str, vm: VirtualMachine) -> str:
    """Why the settled ``vm`` contradicts its just-succeeded ``kind`` job ("" when it does not).

    Reads what ``finish_vm`` just asked the host: no further libvirt call.
    """
    wanted = EXPECTED_STATES.get(kind)
    state = vm.power_state if vm.host_id is not None else PowerState.REPORT_MISSING
    if wanted is None or state in wanted or state == PowerState.UNKNOWN:
        return ""  # an unreachable host says nothing either way: the sync will tell
    happened = HAPPENED.get(state, f"became {state} outside Corral")
    if state in RUNNING and kind == JobKind.SUSPEND:
        happened = "was resumed outside Corral"
    return (
        f"VM {vm.name} {happened} while it was being {BEING[kind]}; "
        f"it is {vm.get_status_display()} now."
    )
