"""What the operations share: libvirt calls that fail the job, waiting for the host to report
a state, hook steps, a VM's transitional status, and placement under the scheduling lock."""

from __future__ import annotations

import time

from django.conf import settings

from hosts import driver
from hosts.error_codes import JobErrorCode
from hosts.guests.consoles import listen_address
from hosts.hooks import HookFailed, hooks_for, run_hooks
from hosts.host_choice import NoHostAvailable, SchedulerBusy, decision, place, wait_for_pending
from hosts.jobs import JobContext, JobFailed, host_detail
from hosts.jobs.settle import RUNNING, STOPPED
from hosts.models import Host, VirtualMachine
from hosts.sync import vm_changed

__all__ = [
    "BASE_SNAPSHOT",
    "Attempts",
    "POLL_S",
    "RUNNING",
    "STOPPED",
    "clear_from",
    "current_state",
    "decided",
    "host_call",
    "hosts_but",
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


def spec_for(vm: VirtualMachine, **boot) -> driver.DomainSpec:
    """The VM's domain; ``boot`` holds its disk, kernel and NIC on a real host
    (``hosts.operations.disks.boot_for``)."""
    template = vm.template
    guest = driver.GuestDevices(
        guest_agent=template.guest_agent,
        graphics=template.graphics or "none",
        graphics_listen=listen_address(vm.host.uri) if vm.host is not None else "127.0.0.1",
        seed=True,
        storage_pool=vm.host.storage_pool if vm.host is not None else "corral",
    )
    return driver.DomainSpec(
        uuid=str(vm.uuid),
        name=vm.domain,
        title=vm.name,
        vcpus=vm.vcpus,
        memory_mb=vm.memory_mb,
        disk_gb=vm.disk_gb,
        networks=tuple(template.networks),
        bridge=template.bridge,
        os_type=template.os_type,
        guest=guest,
        **boot,
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
        raise JobFailed(JobErrorCode.HOOK_FAILED, exc.message) from exc


def host_call(fn, *args):
    """A driver call whose failure fails the job with the driver's code and message (the
    host's own words as its detail, for the admins). Only a host that does not answer, or
    does not let Corral in, is ``host_unreachable``: a host that answers and fails the call
    is that operation's failure."""
    try:
        return fn(*args)
    except driver.HostUnreachable as exc:
        raise JobFailed(JobErrorCode.HOST_UNREACHABLE, exc.message, detail=exc.detail) from exc
    except driver.DriverError as exc:
        raise JobFailed(exc.code, exc.message, detail=exc.detail) from exc


def current_state(vm: VirtualMachine) -> str | None:
    """The VM's power state on its host now (None: no host, or no domain there)."""
    if vm.host is None:
        return None
    return host_call(driver.domain_power_state, vm.host.uri, str(vm.uuid))


def wait_for(
    ctx: JobContext,
    host: Host,
    wanted: set[str],
    failing: set[str],
    what: str,
    timeout: float | None = None,
) -> str | None:
    """Poll the host until the VM's state is in ``wanted``; fail fast on ``failing``.

    Past ``CORRAL_TRANSITION_TIMEOUT`` the job fails; past a ``timeout`` given, None is
    returned instead (the caller decides what follows).
    """
    limit = settings.CORRAL_TRANSITION_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + limit
    while True:
        state = host_call(driver.domain_power_state, host.uri, str(ctx.vm.uuid))
        if state in wanted:
            return state
        if state in failing or state is None:
            raise JobFailed(
                JobErrorCode.UNEXPECTED_STATE,
                f"The VM is {state or 'gone'} on {host.name} while {what}; the host decides.",
            )
        if time.monotonic() > deadline:
            if timeout is not None:
                return None
            raise JobFailed(
                JobErrorCode.TIMEOUT,
                f"The VM was still {state} on {host.name} after {limit:.0f} s while {what}.",
            )
        ctx.check_cancelled()
        time.sleep(POLL_S)


def place_vm(ctx: JobContext, vm: VirtualMachine, record, exclude=(), only: Host | None = None):
    """Choose a host by the cluster's policy (any but the ``exclude``d ones, which failed this
    job; ``only`` that one, when given, if the policy lets it) and ``record(host)`` the
    choice, both under the cluster's scheduling lock. When none fits while the cluster is
    still settling (VMs starting, hosts just added), wait for it once and try again."""
    for attempt in (1, 2):
        started = time.monotonic()
        hosts = hosts_but(vm, exclude)
        if only is not None:
            hosts = [host for host in (hosts or [only]) if host.pk == only.pk]
        try:
            with decision(vm.cluster_id):
                chosen = place(vm, hosts=hosts)
                record(chosen.host)
            decided(ctx, chosen.explanation, started, "placed")
            return chosen
        except NoHostAvailable as exc:
            if attempt == 2 or not wait_for_pending(vm):
                decided(ctx, exc.explanation, started, refusal(exc))
                raise JobFailed(
                    JobErrorCode.NO_HOST, exc.message, {"placement": exc.explanation}
                ) from exc
            ctx.log("No host fitted while the cluster was settling; trying once more")


def hosts_but(vm: VirtualMachine, exclude) -> list[Host] | None:
    """The VM's cluster's hosts but ``exclude`` (None, all of them, when none is excluded)."""
    if not exclude:
        return None
    return list(
        Host.objects.filter(cluster_id=vm.cluster_id).exclude(pk__in=exclude).order_by("pk")
    )


class Attempts:
    """The hosts one start or migration tried, in order, each with its outcome and why; a
    host that failed is never tried again in the job. After ``CORRAL_PLACEMENT_TRIES``
    failures the job fails, naming them all."""

    def __init__(self, ctx: JobContext, what: str, limit: int | None = None):
        self.ctx = ctx
        self.what = what
        self.limit = max(1, limit or settings.CORRAL_PLACEMENT_TRIES)
        self.tried: list[dict] = []
        self.failed: set[int] = set()
        # What each failed host said (libvirt's words), for the job's detail: the admins'.
        self.details: list[str] = []

    def succeeded(self, host: Host) -> None:
        self.tried.append({"host": host.name, "outcome": "succeeded", "reason": ""})
        self.ctx.log(f"{self.what} on {host.name} succeeded (try {len(self.tried)})")

    def failed_on(self, host: Host, exc: JobFailed) -> None:
        """Record that ``host`` failed; raise when no try is left (or none may follow)."""
        self.tried.append(
            {"host": host.name, "outcome": "failed", "reason": exc.message, "code": exc.code}
        )
        self.failed.add(host.pk)
        detail = host_detail(exc)
        if detail:
            self.details.append(f"{host.name}: {detail}")
        self.ctx.log(f"{self.what} on {host.name} failed: {exc.message}", detail=detail)
        if len(self.tried) >= self.limit:
            names = ", ".join(attempt["host"] for attempt in self.tried)
            raise JobFailed(
                exc.code,
                f"{self.what} failed on {len(self.tried)} host(s) ({names}); last: {exc.message}",
                {"attempts": self.tried},
                detail=self.detail,
            ) from exc
        self.ctx.log(f"Trying the next host ({len(self.tried) + 1} of at most {self.limit})")

    def placing(self, choose):
        """``choose()`` the next host; a refusal after failed tries names them too."""
        try:
            return choose()
        except JobFailed as exc:
            if not self.tried:
                raise
            last = self.tried[-1]
            if exc.code == JobErrorCode.NO_HOST and last["outcome"] == "failed":
                # No other host can take it: what the user needs is why the hosts failed.
                names = ", ".join(attempt["host"] for attempt in self.tried)
                raise JobFailed(
                    last["code"],
                    f"{self.what} failed on {len(self.tried)} host(s) ({names}) and no other "
                    f"host can take it; last: {last['reason']}",
                    {**(exc.result or {}), "attempts": self.tried},
                    detail=self.detail,
                ) from exc
            exc.result = {**(exc.result or {}), "attempts": self.tried}
            exc.detail = exc.detail or self.detail
            raise

    @property
    def detail(self) -> str:
        """What each host that failed said, one line each (its name first)."""
        return "\n".join(self.details)


def clear_from(ctx: JobContext, vm: VirtualMachine, host: Host) -> bool:
    """Remove the VM's domain (by its UUID: never another domain) from a host that failed it,
    so it never runs there too; False when the host could not be asked."""
    try:
        driver.undefine(host.uri, str(vm.uuid))
    except driver.DriverError as exc:
        ctx.log(f"Could not remove the VM from {host.name}: {exc.message}", detail=exc.detail)
        return False
    return True


def decided(ctx: JobContext, explanation: dict, started: float, outcome: str) -> None:
    """Record a placement decision on the job: how it ended and how long it took (waiting for
    the scheduling lock included), for "why this host" and the scheduler's metrics."""
    explanation["outcome"] = outcome
    explanation["seconds"] = round(time.monotonic() - started, 6)
    ctx.placement = explanation


def refusal(exc: NoHostAvailable) -> str:
    return "busy" if isinstance(exc, SchedulerBusy) else "no_host"
