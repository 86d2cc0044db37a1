"""Which VMs of a pool are free, prestarted or busy: the querysets allocation, shrinking and the
prestart monitor share."""

from django.db import connection
from django.db.models import Case, Count, Exists, IntegerField, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce

from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from pools.models import FREE, VmPool, prestarted_condition


def active_job(kind: str | None = None):
    """A VM has a job queued or running (of ``kind``, when given)."""
    jobs_on_vm = Job.objects.filter(vm=OuterRef("pk"), state__in=ACTIVE_JOB_STATES)
    if kind is not None:
        jobs_on_vm = jobs_on_vm.filter(kind=kind)
    return Exists(jobs_on_vm)


def free_vms():
    """VMs that no user holds and no admin holds back."""
    return VirtualMachine.objects.filter(FREE)


def unassigned(pool: VmPool):
    """The pool's VMs that no user holds and no admin holds back."""
    return free_vms().filter(pool=pool)


def prestarted():
    """VMs that count toward their pool's prestarted level (``pools.models.PRESTARTED_STATUSES``:
    unassigned, not held, and running, paused, on their way up or unknown)."""
    return VirtualMachine.objects.filter(prestarted_condition())


# The order allocation prefers free VMs in: running, then being started, then stopped.
UP, STARTING, DOWN = 0, 1, 2


def _candidates(pool: VmPool, user):
    """The pool's VMs allocation may hand out, each with its ``preference`` (UP, STARTING,
    DOWN), for one being started the ``start_job_id`` of that start, and ``held``: how many
    of the pool's VMs ``user`` holds (read in the same statement, so after the caller's lock).

    Running with no job, being started with no other job, or stopped with no job: one query
    whatever the pool's size, so a pool of 1,000 VMs costs the statements a pool of one does.
    """
    active = Job.objects.filter(vm=OuterRef("pk"), state__in=ACTIVE_JOB_STATES)
    start_jobs = active.filter(kind=JobKind.START)
    idle = ~Exists(active)
    starting = Exists(start_jobs) & ~Exists(active.exclude(kind=JobKind.START))
    return (
        unassigned(pool)
        .filter((Q(status=VmStatus.UP) & idle) | starting | (Q(status=VmStatus.DOWN) & idle))
        .annotate(
            preference=Case(
                When(Q(status=VmStatus.UP) & idle, then=Value(UP)),
                When(starting, then=Value(STARTING)),
                default=Value(DOWN),
                output_field=IntegerField(),
            ),
            start_job_id=Subquery(start_jobs.order_by("pk").values("pk")[:1]),
            held=held_count(pool, user),
        )
        .order_by("preference", "pool_index", "pk")
    )


def held_count(pool: VmPool, user) -> Subquery:
    """How many of the pool's VMs ``user`` holds, as a sub-select."""
    held = (
        VirtualMachine.objects.filter(pool=pool, owner=user)
        .order_by()
        .values("owner")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(held), 0)


def pick_free_vm(pool: VmPool, user) -> VirtualMachine | None:
    """Lock and return the VM to hand out to ``user`` (see ``_candidates``), or None when
    none is free.

    ``SKIP LOCKED`` lets concurrent allocations pass each other. But a free VM may be locked
    by another writer that does not take it (the sync updating its status, a job being
    queued): skipping it would refuse with "no free VM" while one is. So when the skipping
    pass finds nothing, a second pass waits for the locks, and hands out a VM that is still
    free once they are released (one taken meanwhile no longer matches and is passed over).
    """
    candidates = _candidates(pool, user)
    vm = candidates.select_for_update(skip_locked=True, of=("self",)).first()
    if vm is None and connection.features.has_select_for_update_skip_locked:
        vm = candidates.select_for_update(of=("self",)).first()
    return vm
