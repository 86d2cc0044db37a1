"""Use cases that change the inventory. Each runs in one transaction."""

import contextlib

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts import checks, jobs, quotas, template_access
from hosts.error_codes import HostErrorCode
from hosts.models import Host, HostStatus, Job, JobKind, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.models.snapshots import why_it_stays
from hosts.signals import host_withdrawn
from project import events
from project.access.grants import grant_role
from project.access.permissions import holds
from project.errors import Refused
from project.models import EventKind, Role


@transaction.atomic
def create_vm(vm: VirtualMachine, *, created_by) -> VirtualMachine:
    """Save a new (validated) VM owned by its creator, who becomes its UserVmManager unless
    their grants already let them manage it; the creation is said in the event feed.

    A VM of a user's template whose images the creator may not see (any more) is refused on
    its template (``template_access.launch_refusal``). Counted against the creator's quota
    (``hosts.quotas.charge``): a VM that would take them past a limit is refused
    (``QuotaExceeded``) and nothing is made."""
    refusal = template_access.launch_refusal(created_by, vm)
    if refusal is not None:
        raise Refused(HostErrorCode.TEMPLATE_IMAGE_HIDDEN, refusal, field="template")
    quotas.charge(created_by, quotas.for_vm(vm))
    vm.owner = created_by
    vm.save()
    if not holds(created_by, "hosts.delete_virtualmachine", vm):
        grant_role(Role.objects.get(name="UserVmManager"), vm, user=created_by)
    events.emit(
        EventKind.CHANGED,
        "vm",
        vm.pk,
        f"VM {vm.name} created by {created_by.get_username()}",
        {"status": vm.status},
        vm_id=vm.pk,
        cluster_id=vm.cluster_id,
        pool_id=vm.pool_id,
        user_id=created_by.pk,
    )
    return vm


def charge_hardware(vm: VirtualMachine, wanted: dict) -> None:
    """Count a VM's hardware grown to ``wanted`` (vCPUs, memory, disk; only what grows)
    against its holder's quota, reading what is stored, with the holder's quota row locked
    until the caller's transaction ends: past a limit it is refused (``QuotaExceeded``) and
    the caller saves nothing. A VM nobody holds counts for nobody."""
    stored = VirtualMachine.objects.select_related("owner").only("owner", *quotas.HARDWARE)
    stored = stored.get(pk=vm.pk)
    growth = quotas.for_growth({n: getattr(stored, n) for n in quotas.HARDWARE}, wanted)
    if any(getattr(growth, n) for n in quotas.HARDWARE):
        quotas.charge(stored.owner, growth)


@transaction.atomic
def delete_vm(vm: VirtualMachine, *, requested_by=None) -> Job | None:
    """Delete a VM that is down: at once if no host holds it, else by a job that removes its
    domain from the host first (returned). A running VM is refused: shut it down first."""
    vm = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
    if vm.status != VmStatus.DOWN:
        raise Refused(
            HostErrorCode.VM_NOT_DOWN,
            f"VM {vm.name} is {vm.get_status_display()}; shut it down before deleting it.",
        )
    busy = Job.objects.filter(vm=vm, state__in=ACTIVE_JOB_STATES).exists()
    if vm.host_id is None and not busy:
        vm.delete()
        return None
    return jobs.submit(JobKind.DELETE, vm=vm, requested_by=requested_by)


@transaction.atomic
def destroy_vm(vm: VirtualMachine, *, requested_by=None) -> list[Job]:
    """Delete a VM whatever it is doing, as Nova deletes a server: after the jobs queued on
    it, power it off, then remove it from its host and delete it. Returns the jobs queued ([]
    when nothing held it and it went at once)."""
    vm = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
    busy = Job.objects.filter(vm=vm, state__in=ACTIVE_JOB_STATES).exists()
    if vm.host_id is None and not busy and vm.status == VmStatus.DOWN:
        vm.delete()
        return []
    queued = []
    if busy or vm.status != VmStatus.DOWN:
        queued.append(jobs.submit(JobKind.POWEROFF, vm=vm, requested_by=requested_by))
    queued.append(jobs.submit(JobKind.DELETE, vm=vm, requested_by=requested_by))
    return queued


# What each operation needs the VM to be, when no other job on it is queued or running
# (starting a paused VM resumes it).
ALLOWED_FROM = {
    JobKind.START: {VmStatus.DOWN, VmStatus.PAUSED},
    JobKind.SHUTDOWN: {VmStatus.UP, VmStatus.PAUSED},
    JobKind.POWEROFF: {VmStatus.UP, VmStatus.PAUSED},
    JobKind.SUSPEND: {VmStatus.UP},
    JobKind.RESUME: {VmStatus.PAUSED},
    JobKind.MIGRATE: {VmStatus.UP, VmStatus.PAUSED},
}
# Jobs that leave a VM's power as it is: while only these are queued on it, its status alone
# says what it can do next.
KEEP_POWER = {JobKind.GUEST_KEYS, JobKind.NOOP, JobKind.SNAPSHOT, JobKind.SNAPSHOT_DELETE}


def operations_allowed_now(status: str, active_kinds) -> list[str]:
    """The operations of ``ALLOWED_FROM`` a VM in ``status`` can start now (in its order), with
    ``active_kinds`` the kinds of the jobs queued or running on it: none while one of them
    changes its power (a start, a stop, a migration, a revert…), for it is on its way to
    another status and what it can do follows once it is there. What the portal offers."""
    if any(kind not in KEEP_POWER for kind in active_kinds):
        return []
    return [kind.value for kind, allowed in ALLOWED_FROM.items() if status in allowed]


@transaction.atomic
def request_operation(
    vm: VirtualMachine,
    kind: str,
    *,
    requested_by,
    params: dict | None = None,
    allowed: set[str] | None = None,
) -> Job:
    """Queue an operation on a VM as a job (coalesced into an identical pending one at the
    tail of the VM's queue).

    Refused (409) when the VM is idle in a state the operation cannot start from
    (``allowed``, else ``ALLOWED_FROM[kind]``); when other jobs are queued on the VM, the
    queue decides in order. The VM's row is locked and read afresh first, and the rules other
    apps add (``hosts.checks.operation_rules``) run on it.
    """
    vm = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
    busy = Job.objects.filter(vm=vm, state__in=ACTIVE_JOB_STATES).exists()
    allowed = ALLOWED_FROM[kind] if allowed is None else allowed
    if kind == JobKind.MIGRATE:
        refuse_moving_snapshots(vm)
    if not busy and vm.status not in allowed:
        if vm.status == VmStatus.UNKNOWN:
            raise Refused(
                HostErrorCode.HOST_UNREACHABLE,
                f"The host of VM {vm.name} is not responding; its state is unknown.",
            )
        raise Refused(
            HostErrorCode.BAD_STATE,
            f"VM {vm.name} is {vm.get_status_display()}; "
            f"it cannot {JobKind(kind).label.lower()} from there.",
        )
    for rule in checks.operation_rules:
        rule(vm, kind, requested_by)
    return jobs.submit(kind, vm=vm, params=params or {}, requested_by=requested_by)


def refuse_moving_snapshots(vm: VirtualMachine) -> None:
    """Refuse to move a VM that has snapshots: they live inside its disk on its host, and
    libvirt moves no internal snapshots."""
    if why := why_it_stays(vm):
        raise Refused(HostErrorCode.HAS_SNAPSHOTS, why)


NOT_HELD_OUTSIDE_POOLS = "VM {vm.name} is in no pool; only a pool's VMs are held for the admins."


@transaction.atomic
def set_admin_hold(vm: VirtualMachine, held: bool, *, requested_by=None) -> VirtualMachine:
    """Hold a pool's VM for the admins (its pool neither hands it out nor counts or prestarts
    it) or release it. Refused (400 on ``admin_hold``) for a VM in no pool."""
    vm = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
    if vm.pool_id is None:
        raise Refused(
            HostErrorCode.NOT_IN_POOL, NOT_HELD_OUTSIDE_POOLS.format(vm=vm), field="admin_hold"
        )
    if vm.admin_hold != held:
        VirtualMachine.objects.filter(pk=vm.pk).update(admin_hold=held, updated_at=timezone.now())
        vm.admin_hold = held
        emit_hold_changed(vm, requested_by)
    return vm


def emit_hold_changed(vm: VirtualMachine, by=None, why: str = "") -> None:
    """Say in the feed that a VM was held for the admins (``why``, if given) or released."""
    who = f" by {by.get_username()}" if by is not None else ""
    events.emit(
        EventKind.CHANGED,
        "vm",
        vm.pk,
        f"VM {vm.name} is held for the admins{who}{why}; its pool hands it to nobody"
        if vm.admin_hold
        else f"VM {vm.name} was released{who}; its pool may hand it out again",
        {"admin_hold": vm.admin_hold},
        vm_id=vm.pk,
        cluster_id=vm.cluster_id,
        pool_id=vm.pool_id,
        user_id=getattr(by, "pk", None),
    )


@transaction.atomic
def set_highly_available(vm: VirtualMachine, on: bool, *, requested_by=None) -> VirtualMachine:
    """Make a VM highly available (started on another host once its host is confirmed down)
    or not. The VM's row is locked and read afresh; a change is said in the event feed."""
    vm = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
    if vm.highly_available != on:
        VirtualMachine.objects.filter(pk=vm.pk).update(
            highly_available=on, updated_at=timezone.now()
        )
        vm.highly_available = on
        who = f" by {requested_by.get_username()}" if requested_by is not None else ""
        events.emit(
            EventKind.CHANGED,
            "vm",
            vm.pk,
            f"VM {vm.name} was made highly available{who}: it is restarted on another host "
            "if its host is confirmed down"
            if on
            else f"VM {vm.name} is no longer highly available{who}",
            {"highly_available": on},
            vm_id=vm.pk,
            cluster_id=vm.cluster_id,
            pool_id=vm.pool_id,
            user_id=getattr(requested_by, "pk", None),
        )
    return vm


# What a VM on a host going into maintenance must be for a migration to move it.
MOVABLE = {VmStatus.UP, VmStatus.PAUSED}


@transaction.atomic
def put_in_maintenance(host: Host, *, requested_by=None) -> list[Job]:
    """Take a host out of service: no VM is placed on it and the sync loop leaves it alone.

    Its running VMs are moved away by migrate jobs (the scheduler picks each destination;
    a VM that fits nowhere stays and its job fails saying why); returns those jobs. Refused
    (409) when the host is in maintenance already. Listeners of ``host_withdrawn`` (leases
    moving reserved capacity away) run first, in this transaction.
    """
    if Host.objects.filter(pk=host.pk).exclude(status=HostStatus.MAINTENANCE).exists():
        host_withdrawn.send(sender=Host, host=host, reason="maintenance")
    # FOR NO KEY UPDATE, as the sync: a job finishing one of the host's VMs checks the VM's
    # foreign key to this row at commit, and must not wait here while we wait for that VM.
    host = Host.objects.select_for_update(no_key=True).get(pk=host.pk)
    if host.status == HostStatus.MAINTENANCE:
        raise Refused(HostErrorCode.IN_MAINTENANCE, f"Host {host.name} is in maintenance already.")
    by = f" by {requested_by.get_username()}" if requested_by is not None else ""
    Host.objects.filter(pk=host.pk).update(
        status=HostStatus.MAINTENANCE,
        status_detail=f"Put in maintenance{by}.",
        updated_at=timezone.now(),
    )
    events.emit(
        EventKind.CHANGED,
        "host",
        host.pk,
        f"Host {host.name} is in maintenance",
        {"status": HostStatus.MAINTENANCE},
        cluster_id=host.cluster_id,
        user_id=getattr(requested_by, "pk", None),
    )
    running = VirtualMachine.objects.filter(host=host, status__in=MOVABLE).order_by("pk")
    return [
        jobs.submit(
            JobKind.MIGRATE, vm=vm, params={"reason": "maintenance"}, requested_by=requested_by
        )
        for vm in running
    ]


@transaction.atomic
def activate_host(host: Host, *, requested_by=None) -> Host:
    """Bring a host back from maintenance: it is Connecting until the sync loop reads it, then
    Up (or NonResponsive). Refused (409) when the host is not in maintenance."""
    host = Host.objects.select_for_update(no_key=True).get(pk=host.pk)
    if host.status != HostStatus.MAINTENANCE:
        raise Refused(
            HostErrorCode.NOT_IN_MAINTENANCE,
            f"Host {host.name} is not in maintenance; nothing to activate.",
        )
    host.status, host.status_detail = HostStatus.CONNECTING, ""
    host.save(update_fields=["status", "status_detail", "updated_at"])
    events.emit(
        EventKind.CHANGED,
        "host",
        host.pk,
        f"Host {host.name} left maintenance",
        {"status": HostStatus.CONNECTING},
        cluster_id=host.cluster_id,
        user_id=getattr(requested_by, "pk", None),
    )
    return host


@transaction.atomic
def confirm_down(host: Host, *, requested_by=None, fenced_by: str = "") -> Job:
    """Record that an admin confirmed ``host`` down (powered off, fenced), or that its fence
    hooks did (``fenced_by`` names them, ``hosts.sync.fencing``), and queue the failover job
    that starts its highly available VMs on other hosts, through the scheduler.

    Only a host NonResponsive for ``CORRAL_HOST_DOWN_GRACE`` seconds or more may be confirmed
    down; while it might still run its VMs, nothing restarts them elsewhere. Refused (409)
    otherwise, and when it was confirmed down already.
    """
    host = Host.objects.select_for_update(no_key=True).get(pk=host.pk)
    if host.status != HostStatus.NON_RESPONSIVE:
        raise Refused(
            HostErrorCode.HOST_NOT_LOST,
            f"Host {host.name} is {host.get_status_display()}; only a host that does not "
            "respond may be confirmed down.",
        )
    if host.confirmed_down_at is not None:
        raise Refused(
            HostErrorCode.CONFIRMED_ALREADY, f"Host {host.name} was confirmed down already."
        )
    now = timezone.now()
    grace = settings.CORRAL_HOST_DOWN_GRACE
    lost_for = (now - (host.non_responsive_since or now)).total_seconds()
    if lost_for < grace:
        raise Refused(
            HostErrorCode.NOT_LOST_LONG_ENOUGH,
            f"Host {host.name} has not responded for {lost_for:.0f} s only; it may be "
            f"confirmed down once it has not for {grace:g} s.",
        )
    if fenced_by:
        who, how = fenced_by, f"Fenced by {fenced_by}: confirmed down."
        by = f" by {fenced_by} (fenced)"
    else:
        who = requested_by.get_username() if requested_by is not None else ""
        by = f" by {who}" if who else ""
        how = f"Confirmed down{by}."
    Host.objects.filter(pk=host.pk).update(
        confirmed_down_at=now, confirmed_down_by=who[:200], status_detail=how, updated_at=now
    )
    events.emit(
        EventKind.CHANGED,
        "host",
        host.pk,
        f"Host {host.name} was confirmed down{by}; its highly available VMs restart elsewhere",
        {"status": host.status, "confirmed_down_at": now.isoformat(), "confirmed_down_by": who},
        cluster_id=host.cluster_id,
        user_id=getattr(requested_by, "pk", None),
    )
    return jobs.submit(
        JobKind.FAILOVER,
        host=host,
        requested_by=requested_by,
        params={"confirmed_down_by": who, "fenced": bool(fenced_by)},
    )


def confirm_fenced(sender, *, host: Host, fenced_by: str, **kwargs) -> None:
    """``host_fenced``'s listener: the host's fence hooks all succeeded, so it is confirmed
    down as by an admin. A host that answered (or was confirmed down) while they ran is left
    as it is."""
    with contextlib.suppress(Refused):
        confirm_down(host, fenced_by=fenced_by)
