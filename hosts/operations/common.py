"""What the operations share: libvirt calls that fail the job, waiting for the host to report
a state, hook steps, a VM's transitional status, and placement under the scheduling lock."""

from __future__ import annotations

import time

from django.conf import settings

from hosts import driver
from hosts.consoles import listen_address
from hosts.hooks import HookFailed, hooks_for, run_hooks
from hosts.jobs import JobContext, JobFailed
from hosts.jobs.settle import RUNNING, STOPPED
from hosts.models import Host, VirtualMachine
from hosts.placement import NoHostAvailable, SchedulerBusy, decision, place, wait_for_pending
from hosts.sync import vm_changed

__all__ = [
    "BASE_SNAPSHOT",
    "POLL_S",
    "RUNNING",
    "STOPPED",
    "current_state",
    "decided",
    "host_call",
    "place_vm",
    "refusal",
    "run_event_hooks",
    "set_status",
    "spec_for",
    "wait_for",
]

POLL_S = 0.1
# The snapshot a stateless pool's VM returns to on every return.
BASE_SNAPSHOT = "corral-base"


def spec_for(vm: VirtualMachine) -> driver.DomainSpec:
    template = vm.template
    # guest_agent and graphics are read with defaults until templates name them.
    guest = driver.GuestDevices(
        guest_agent=bool(getattr(template, "guest_agent", True)),
        graphics=getattr(template, "graphics", "vnc") or "none",
        graphics_listen=listen_address(vm.host.uri) if vm.host is not None else "127.0.0.1",
        seed=True,
    )
    return driver.DomainSpec(
        uuid=str(vm.uuid),
        name=vm.name,
        vcpus=vm.vcpus,
        memory_mb=vm.memory_mb,
        disk_gb=vm.disk_gb,
        networks=tuple(template.networks),
        os_type=template.os_type,
        guest=guest,
    )


def set_status(vm: VirtualMachine, status: str, **fields) -> None:
    """Put the VM in a (transitional) status while its job runs, and say so in the feed."""
    VirtualMachine.objects.filter(pk=vm.pk).update(status=status, **fields)
    vm.status = status
    for name, value in fields.items():
        setattr(vm, name, value)
    vm_changed(vm, f"VM {vm.name} is {vm.get_status_display()}")


def run_event_hooks(ctx: JobContext, event: str, progress: float) -> None:
    """The hooks of ``event`` as one step of the job (no step when there are none)."""
    if not hooks_for(event):
        return
    ctx.step(f"Running {event} hooks", progress)
    try:
        run_hooks(
            event, vm_uuid=str(ctx.vm.uuid), vm_id=ctx.vm.pk, reason=ctx.job.kind, log=ctx.log
        )
    except HookFailed as exc:
        raise JobFailed("hook_failed", exc.message) from exc


def host_call(fn, *args):
    """A driver call whose failure fails the job with the driver's code and message."""
    try:
        return fn(*args)
    except driver.HostUnreachable as exc:
        raise JobFailed("host_unreachable", exc.message) from exc
    except driver.DriverError as exc:
        raise JobFailed(exc.code, exc.message) from exc


def current_state(vm: VirtualMachine) -> str | None:
    """The VM's power state on its host now (None: no host, or no domain there)."""
    if vm.host is None:
        return None
    return host_call(driver.domain_power_state, vm.host.uri, str(vm.uuid))


def wait_for(ctx: JobContext, host: Host, wanted: set[str], failing: set[str], what: str) -> str:
    """Poll the host until the VM's state is in ``wanted``; fail fast on ``failing``."""
    deadline = time.monotonic() + settings.CORRAL_TRANSITION_TIMEOUT
    while True:
        state = host_call(driver.domain_power_state, host.uri, str(ctx.vm.uuid))
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


def place_vm(ctx: JobContext, vm: VirtualMachine, record):
    """Choose a host by the cluster's policy and ``record(host)`` the choice, both under the
    cluster's scheduling lock. When none fits while the cluster is still settling (VMs
    starting, hosts just added), wait for it once and try again."""
    for attempt in (1, 2):
        started = time.monotonic()
        try:
            with decision(vm.cluster_id):
                chosen = place(vm)
                record(chosen.host)
            decided(ctx, chosen.explanation, started, "placed")
            return chosen
        except NoHostAvailable as exc:
            if attempt == 2 or not wait_for_pending(vm):
                decided(ctx, exc.explanation, started, refusal(exc))
                raise JobFailed("no_host", exc.message, {"placement": exc.explanation}) from exc
            ctx.log("No host fitted while the cluster was settling; trying once more")


def decided(ctx: JobContext, explanation: dict, started: float, outcome: str) -> None:
    """Record a placement decision on the job: how it ended and how long it took (waiting for
    the scheduling lock included), for "why this host" and the scheduler's metrics."""
    explanation["outcome"] = outcome
    explanation["seconds"] = round(time.monotonic() - started, 6)
    ctx.placement = explanation


def refusal(exc: NoHostAvailable) -> str:
    return "busy" if isinstance(exc, SchedulerBusy) else "no_host"
