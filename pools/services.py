"""VM pool use cases: create and resize pools, allocate a VM, return it.

Allocation is one transaction that locks only what it takes: the caller's user row (so one
user's concurrent requests cannot exceed ``max_user_vms`` or their quota) and the VM it hands
out, chosen with ``SKIP LOCKED`` so concurrent allocations pass each other instead of queueing
(and waiting for locked rows only when skipping them left nothing). A VM is never handed to two
users: it is assigned under its row lock, and only while unassigned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Case, Max, When
from django.utils import timezone

from hosts import images, jobs, quotas, snapshots
from hosts.error_codes import HostErrorCode
from hosts.guests import keys as guest_keys
from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.services import emit_hold_changed
from pools.error_codes import PoolErrorCode
from pools.models import PoolType, VmPool
from pools.queries import active_job, pick_free_vm, unassigned
from pools.takeable import DOWN, STARTING, UP
from pools.tasks import nudge_monitor
from project import events
from project.access.grants import add_user_grant, revoke_role
from project.errors import Refused
from project.models import EventKind, Role

logger = logging.getLogger(__name__)


class PoolExhausted(Refused):
    def __init__(self, message: str) -> None:
        super().__init__(PoolErrorCode.POOL_EXHAUSTED, message)


class UserLimitReached(Refused):
    def __init__(self, message: str) -> None:
        super().__init__(PoolErrorCode.USER_LIMIT, message)


@dataclass
class Allocation:
    vm: VirtualMachine
    job: Job | None  # the start job when the VM was not up yet
    instant: bool


# -- pools and their VMs ---------------------------------------------------------------------


def _add_vms(pool: VmPool, count: int) -> list[VirtualMachine]:
    """Create ``count`` VMs for the pool and queue the jobs that prepare them on hosts."""
    if count <= 0:
        return []
    template = pool.template
    start = (VirtualMachine.objects.filter(pool=pool).aggregate(n=Max("pool_index"))["n"] or 0) + 1
    # VMs a shrink took out keep their names until their delete job runs: new VMs skip the
    # names still taken rather than waiting for them.
    taken = set(VirtualMachine.objects.filter(cluster=pool.cluster).values_list("name", flat=True))
    made = []
    number = start
    while len(made) < count:
        name = pool.vm_name(number)
        if name in taken:
            number += 1
            continue
        made.append(
            VirtualMachine(
                name=name,
                cluster=pool.cluster,
                template=template,
                pool=pool,
                pool_index=number,
                vcpus=template.vcpus,
                memory_mb=template.memory_mb,
                disk_gb=template.disk_gb,
            )
        )
        number += 1
    try:
        with transaction.atomic():
            VirtualMachine.objects.bulk_create(made)
    except IntegrityError as exc:
        raise Refused(
            PoolErrorCode.VM_CREATE_FAILED, f"Could not create the pool's VMs: {exc}"
        ) from exc
    created = list(VirtualMachine.objects.filter(pool=pool, pool_index__gte=start))
    for vm in created:
        jobs.submit(JobKind.PREPARE, vm=vm)
    return created


@transaction.atomic
def create_pool(pool: VmPool) -> VmPool:
    """Save a validated pool and create its VMs (each defined on a host, base snapshot taken);
    the creation is said in the event feed."""
    pool.save()
    _add_vms(pool, pool.size)
    events.emit(
        EventKind.CHANGED,
        "pool",
        pool.pk,
        f"Pool {pool.name} created with {pool.size} VM(s)",
        {"size": pool.size},
        pool_id=pool.pk,
        cluster_id=pool.cluster_id,
    )
    images.distribute(pool.template, pool.cluster_id)
    transaction.on_commit(lambda: nudge_monitor(pool.pk))
    return pool


@transaction.atomic
def update_pool(pool: VmPool, changes: dict) -> list[str]:
    """Apply validated changes; grow or shrink to a new size. Returns warnings for the caller."""
    pool = VmPool.objects.select_for_update().get(pk=pool.pk)
    warnings = []
    old_size, old_prestarted = pool.size, pool.prestarted_vms
    for name, value in changes.items():
        setattr(pool, name, value)
    if pool.size < old_size:
        _shrink(pool, old_size - pool.size)
    pool.save()
    if pool.size > old_size:
        _add_vms(pool, pool.size - old_size)
    if pool.prestarted_vms < old_prestarted:
        warnings.append("prestarted VMs are not shut down automatically")
    transaction.on_commit(lambda: nudge_monitor(pool.pk))
    return warnings


def _shrink(pool: VmPool, count: int) -> None:
    """Remove ``count`` unassigned VMs, stopped ones first; refuse if there are not enough.

    The VMs are locked before they go, in the order allocation picks them: an allocation
    under way holds its VM's lock, so the shrink waits for it, and a VM it handed out no
    longer matches and is passed over for another.
    """
    removable = (
        unassigned(pool)
        .filter(status__in=[VmStatus.DOWN, VmStatus.UP, VmStatus.PAUSED])
        .filter(~active_job())
    )
    stopped_first = Case(When(status=VmStatus.DOWN, then=0), default=1)
    chosen: list[VirtualMachine] = []
    while len(chosen) < count:
        wanted = list(
            removable.exclude(pk__in=[vm.pk for vm in chosen])
            .order_by(stopped_first, "-pool_index", "-pk")
            .values_list("pk", flat=True)[: count - len(chosen)]
        )
        if not wanted:
            break
        chosen += (
            removable.filter(pk__in=wanted)
            .select_for_update(of=("self",))
            .order_by("pool_index", "pk")
        )
    if len(chosen) < count:
        stopped = removable.filter(status=VmStatus.DOWN).count()
        raise Refused(
            PoolErrorCode.CANNOT_SHRINK,
            f"Cannot shrink {pool.name} by {count}: only {stopped} unassigned stopped and "
            f"{removable.count() - stopped} unassigned running VMs can go (the others are "
            "assigned or busy).",
        )
    for vm in chosen:
        _remove_vm(vm)


def _remove_vm(vm: VirtualMachine) -> None:
    """Take an unassigned VM out of its pool and queue its removal (stopping it first if it
    runs). Refuses a VM a user holds: whoever removes it takes it from its user first."""
    taken_out = VirtualMachine.objects.filter(pk=vm.pk, owner__isnull=True).update(
        pool=None, admin_hold=True
    )
    if not taken_out:
        raise Refused(
            PoolErrorCode.VM_TAKEN,
            f"VM {vm.name} was given to a user meanwhile; it was not removed.",
        )
    if vm.status in (VmStatus.UP, VmStatus.PAUSED):
        jobs.submit(JobKind.POWEROFF, vm=vm)
    if vm.host_id is None and vm.status == VmStatus.DOWN:
        VirtualMachine.objects.filter(pk=vm.pk).delete()
    else:
        jobs.submit(JobKind.DELETE, vm=vm)


@transaction.atomic
def delete_pool(pool: VmPool, *, force: bool = False) -> None:
    """Delete a pool and its VMs. Refused while users hold VMs, unless ``force``. The
    deletion is said in the event feed."""
    pool = VmPool.objects.select_for_update().get(pk=pool.pk)
    # Locked before the check: an allocation under way is waited for, and its VM counts as held.
    vms = list(
        VirtualMachine.objects.filter(pool=pool)
        .select_for_update(of=("self",))
        .order_by("pool_index", "pk")
    )
    held = [vm for vm in vms if vm.owner_id]
    if held and not force:
        names = ", ".join(vm.name for vm in held[:5])
        raise Refused(
            PoolErrorCode.POOL_IN_USE,
            f"Users hold VMs of {pool.name} ({names}); return them first, or delete with force.",
        )
    for vm in vms:
        if vm.owner_id:
            revoke_role(_user_role(), vm, user=vm.owner)
            VirtualMachine.objects.filter(pk=vm.pk).update(owner=None)
        _remove_vm(vm)
    pool_id = pool.pk
    pool.delete()
    events.emit(
        EventKind.CHANGED,
        "pool",
        pool_id,
        f"Pool {pool.name} deleted",
        {"deleted": True},
        pool_id=pool_id,
        cluster_id=pool.cluster_id,
    )


# -- allocation and return ---------------------------------------------------------------------


USER_ROLE = "UserRole"


def _user_role() -> Role:
    return Role.objects.get(name=USER_ROLE)


def _held(pool: VmPool, user) -> int:
    return VirtualMachine.objects.filter(pool=pool, owner=user).count()


def allocate_vm(pool: VmPool, user) -> Allocation:
    """Hand ``user`` a VM of the pool: an Up one if any (instant), else one being started,
    else a stopped one (started now, placed by the scheduler). Never the same VM twice, never
    more than ``max_user_vms`` per user, nor past the user's quota (``QuotaExceeded``: a
    pool's VM counts for its holder); PoolExhausted when none is left.

    A few statements whatever the pool's size and the user's grants: the user's row locked
    with their quota's limits read, the VM picked and locked with the count of the user's VMs
    in the pool and what they hold in all (``hosts.quotas.vm_usage_columns``), then the VM
    assigned, the grant, the start job and the events written in one statement each.
    ``pool`` is used as given (the caller has just read it).

    When every free VM is locked by other takers, the pick waits for them (``pick_free_vm``);
    many such waits on PostgreSQL can end in a deadlock, which it breaks by failing one
    transaction: that allocation is tried again from the start (``DEADLOCK_TRIES`` in all).
    """
    for attempt in range(1, DEADLOCK_TRIES + 1):
        try:
            return _allocate(pool, user)
        except OperationalError as exc:
            again = _deadlocked(exc) and attempt < DEADLOCK_TRIES
            if not again or connection.in_atomic_block:
                raise
            logger.info("allocation from pool %s deadlocked; trying again", pool.pk)
    raise AssertionError("unreachable")


# How many times an allocation that PostgreSQL ended to break a deadlock is tried in all.
DEADLOCK_TRIES = 3


def _deadlocked(exc: OperationalError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) == "40P01"  # deadlock_detected


def _allocate(pool: VmPool, user) -> Allocation:
    with transaction.atomic():
        # The user's row is locked first, so that one user's requests take turns: the counts
        # of what they hold, read after it (in the pool, and against their quota), are exact.
        limits = quotas.lock_limits(user)
        vm = pick_free_vm(pool, user)
        held = vm.held if vm is not None else _held(pool, user)
        if held >= pool.max_user_vms:
            raise UserLimitReached(
                f"You hold {held} VM(s) of {pool.name}, its limit per user; "
                "return one before taking another."
            )
        if vm is None:
            raise PoolExhausted(f"Pool {pool.name} has no free VM left; try again later.")
        # A pool's VM counts for its holder while they hold it.
        quotas.check(limits, quotas.vm_usage_of(vm), quotas.for_vm(vm))
        vm.owner, vm.taken_at = user, timezone.now()
        VirtualMachine.objects.filter(pk=vm.pk).update(owner=user, taken_at=vm.taken_at)
        add_user_grant(USER_ROLE, vm, user)
        given = dict(
            kind=EventKind.CHANGED,
            object_type="vm",
            object_id=vm.pk,
            message=f"VM {vm.name} of pool {pool.name} given to {user.username}",
            data={"owner": user.username},
            vm_id=vm.pk,
            cluster_id=vm.cluster_id,
            pool_id=pool.pk,
            user_id=user.pk,
        )
        job = None
        if vm.passing_jobs:
            # Keys being put in for its last holder (or nobody): this user's supersede them.
            events.emit_many([given])
            guest_keys.supersede(vm, requested_by=user)
            if vm.preference == DOWN:
                job = jobs.submit(JobKind.START, vm=vm, requested_by=user)
        elif vm.preference == UP and vm.pushes_keys:
            # Running since before its user existed: the keys go in through its agent.
            jobs.submit_to_idle_vm(JobKind.GUEST_KEYS, vm, requested_by=user, also_emit=[given])
        elif vm.preference == DOWN:
            # Picked with no job and locked since: the start heads the VM's queue.
            job = jobs.submit_to_idle_vm(JobKind.START, vm, requested_by=user, also_emit=[given])
        else:
            events.emit_many([given])
        if vm.preference == STARTING:
            # The job seen when the VM was picked: it may have ended since, and asking for an
            # active one again would then answer "being started" with no job to follow.
            job = Job.objects.get(pk=vm.start_job_id)
        if pool.prestarted_vms > 0 and vm.preference != DOWN:
            # It took a prestarted VM: the monitor starts another. A stopped VM taken leaves
            # the prestarted count as it was, and the monitor with nothing new to do.
            pool_id = pool.pk
            transaction.on_commit(lambda: nudge_monitor(pool_id, coalesce=True))
    return Allocation(vm=vm, job=job, instant=vm.preference == UP)


def return_vm(vm: VirtualMachine, *, requested_by=None) -> list[Job]:
    """Give a VM back to its pool: its user loses it, and the snapshots they took go; a
    stateless pool reverts it to its base snapshot (stopping it first if it runs). Returns the
    jobs that do that."""
    with transaction.atomic():
        # Lock the VM row only: PostgreSQL cannot lock the nullable side of the pool join.
        vm = (
            VirtualMachine.objects.select_for_update(of=("self",))
            .select_related("pool")
            .get(pk=vm.pk)
        )
        if vm.pool is None:
            raise Refused(HostErrorCode.NOT_IN_POOL, f"VM {vm.name} is not in a pool.")
        if vm.owner_id is not None:
            revoke_role(_user_role(), vm, user=vm.owner)
            VirtualMachine.objects.filter(pk=vm.pk).update(owner=None, taken_at=None)
            vm.owner, vm.taken_at = None, None
        queued = []
        if (dropped := snapshots.drop_all(vm, requested_by=requested_by)) is not None:
            queued.append(dropped)
        if vm.pool.stateless:
            if vm.status not in (VmStatus.DOWN, VmStatus.UNKNOWN):
                queued.append(jobs.submit(JobKind.POWEROFF, vm=vm, requested_by=requested_by))
            queued.append(jobs.submit(JobKind.REVERT, vm=vm, requested_by=requested_by))
        elif (taken_out := guest_keys.follow(vm, requested_by=requested_by)) is not None:
            # Kept running as it is: its last user's keys leave the guest.
            queued.append(taken_out)
        events.emit(
            EventKind.CHANGED,
            "vm",
            vm.pk,
            f"VM {vm.name} returned to pool {vm.pool.name}",
            vm_id=vm.pk,
            cluster_id=vm.cluster_id,
            pool_id=vm.pool_id,
        )
        pool_id = vm.pool_id
        transaction.on_commit(lambda: nudge_monitor(pool_id))
    return queued


def no_snapshots_in_stateless_pools(vm: VirtualMachine, kind: str, requested_by) -> None:
    """A stateless pool's VM takes no snapshots: it goes back to its base when it is given
    back, and a revert to a user's snapshot would mix with that. An operation rule
    (``hosts.checks``)."""
    if kind != JobKind.SNAPSHOT or vm.pool_id is None:
        return
    if VmPool.objects.filter(pk=vm.pool_id, stateless=True).exists():
        raise Refused(
            HostErrorCode.SNAPSHOTS_REFUSED,
            f"VM {vm.name} is in a stateless pool: it goes back to its base when it is given "
            "back, so it takes no snapshots.",
        )


def hold_when_started_by_another(vm: VirtualMachine, kind: str, requested_by) -> None:
    """oVirt's "running not by the admin": a pool's VM that someone other than its user starts
    (through the API, the portal or the admin console) is held for the admins (``admin_hold``),
    so its pool neither hands it out nor counts it as prestarted until it is released.

    An operation rule (``hosts.checks``): it runs with the VM's row locked, so an allocation
    either handed the VM out before (and its user is known here) or skips it after. The
    prestart monitor's starts and an allocation's start do not come here.
    """
    if kind != JobKind.START or vm.pool_id is None or requested_by is None:
        return
    if vm.admin_hold or vm.owner_id == requested_by.pk:
        return
    VirtualMachine.objects.filter(pk=vm.pk).update(admin_hold=True)
    vm.admin_hold = True
    emit_hold_changed(vm, requested_by, why=" (started by them, not by its pool)")


def on_vm_stopped(sender=None, vm_id: int | None = None, with_host: bool = False, **kwargs) -> None:
    """An automatic pool takes a VM back when it stops (its user shut it down). A VM that
    stopped with its host (a host restart or failure) stays with its holder, Down: taking it
    back would revert their work for something they did not do."""
    vm = VirtualMachine.objects.select_related("pool").filter(pk=vm_id).first()
    if vm is None or vm.pool is None or vm.pool.type != PoolType.AUTOMATIC:
        return
    if with_host and vm.owner_id is not None:
        return
    if vm.owner_id is None and not vm.pool.stateless:
        return
    if (
        vm.owner_id is None
        and Job.objects.filter(vm=vm, kind=JobKind.REVERT, state__in=ACTIVE_JOB_STATES).exists()
    ):
        return  # returned already (an admin's return stopped it): the revert is queued
    return_vm(vm)
