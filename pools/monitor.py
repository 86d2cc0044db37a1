"""The prestart monitor: keeps each pool's ``prestarted_vms`` running and unassigned, so a user
who takes a VM gets one at once. One run starts what pools miss: ``run_for_all_pools`` (the
ticker's) or ``run_for_pool`` (what a nudge queues for one pool after an allocation, a return or
a pool change: ``pools.tasks``). It counts failed prestarts per VM, waits longer after each
before trying the VM again (``VMPOOL_MONITOR_INTERVAL`` doubled each time), and gives up on a
VM, with one alert, after ``VMPOOL_MONITOR_MAX_ATTEMPTS`` or at once when the failure is one no
retry can fix."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from hosts import jobs
from hosts.error_codes import NOT_FIXED_BY_RETRYING
from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from pools.models import VmPool
from pools.queries import active_job, free_vms, prestarted
from project import events
from project.db import count_of

# The reason a prestart's start job carries: its failures are counted against the VM.
PRESTART = "prestart"


def prestarted_count(pool: VmPool) -> int:
    """The pool's VMs that are prestarted or being prestarted."""
    return prestarted().filter(pool=pool).count()


def run_for_pool(pool_id: int) -> int:
    """One monitor run over one pool: start up to a batch of the VMs the pool misses to reach
    ``prestarted_vms``; how many.

    The pool's row is locked while counting and queueing, so two monitors at once (two task
    clusters, or a tick and a nudge) never start more than needed; VMs already starting count.
    """
    return _start_missing([pool_id])[pool_id]


def run_for_all_pools() -> dict[int, int]:
    """One monitor run over every pool short of its prestarted VMs; pool id -> VMs started.

    The run starts at most ``VMPOOL_MONITOR_BATCH_SIZE`` VMs in all, shared fairly among the
    short pools (``_start_missing``). The pools short of VMs are found in one query, so a run
    over pools at their level costs that query alone and locks nothing; the short ones are then
    served together: a few queries for any number of pools, besides the task queue's one
    message per start.
    """
    short = list(
        VmPool.objects.filter(prestarted_vms__gt=0)
        .annotate(prestarted=count_of(prestarted(), "pool"))
        .filter(prestarted__lt=F("prestarted_vms"))
        .values_list("pk", flat=True)
    )
    return _start_missing(short) if short else {}


def _start_missing(pool_ids: list[int]) -> dict[int, int]:
    """Queue starts for what the pools miss of their prestarted VMs, at most a batch in all;
    pool id -> VMs started, for every id given.

    The batch is shared round-robin, filling the emptiest first: each candidate would be its
    pool's n-th prestarted VM (the ones it has, plus its rank among the pool's candidates), and
    the lowest n go first (ties to the lower pool id). So a big pool that misses many VMs takes
    one slot per round like every other short pool, and a pool served in one run is not served
    before the others in the next. The pools are locked together, in id order, and counted
    again under their locks; their candidates (Down, unassigned, not given up on, no job) are
    picked in one query and queued in one batch.
    """
    batch = settings.VMPOOL_MONITOR_BATCH_SIZE
    counts = dict.fromkeys(pool_ids, 0)
    with transaction.atomic():
        levels = dict(
            VmPool.objects.select_for_update()
            .filter(pk__in=pool_ids, prestarted_vms__gt=0)
            .order_by("pk")
            .values_list("pk", "prestarted_vms")
        )
        counted = dict(
            prestarted()
            .filter(pool__in=list(levels))
            .order_by()
            .values("pool")
            .annotate(n=Count("pk"))
            .values_list("pool", "n")
        )
        missing = {
            pool_id: min(level - counted.get(pool_id, 0), batch)
            for pool_id, level in levels.items()
            if level > counted.get(pool_id, 0)
        }
        if not missing or batch <= 0:
            return counts
        ranked = (
            free_vms()
            .filter(
                pool__in=list(missing),
                status=VmStatus.DOWN,
                prestart_failures__lt=settings.VMPOOL_MONITOR_MAX_ATTEMPTS,
            )
            .filter(Q(prestart_retry_at__isnull=True) | Q(prestart_retry_at__lte=timezone.now()))
            .filter(~active_job())
            .annotate(
                rank=Window(
                    RowNumber(), partition_by=F("pool"), order_by=[F("pool_index"), F("pk")]
                )
            )
            .filter(rank__lte=batch)
            .order_by("pool", "rank")
        )
        wanted = [vm for vm in ranked if vm.rank <= missing[vm.pool_id]]
        wanted.sort(key=lambda vm: (counted.get(vm.pool_id, 0) + vm.rank, vm.pool_id))
        candidates = wanted[:batch]
        started = jobs.submit_many(JobKind.START, candidates, params={"reason": PRESTART})
    pool_of = {vm.pk: vm.pool_id for vm in candidates}
    for job in started:
        counts[pool_of[job.vm_id]] += 1
    return counts


def on_job_finished(sender=None, job: Job | None = None, **kwargs) -> None:
    """Count failed prestarts per VM (giving up after the limit, with an alert); any start of
    the VM that succeeds (a prestart, or one a user or admin asked for) clears the count."""
    if job is None or job.vm_id is None or job.kind != JobKind.START:
        return
    if job.state == "succeeded":
        VirtualMachine.objects.filter(pk=job.vm_id, prestart_failures__gt=0).update(
            prestart_failures=0, prestart_retry_at=None
        )
        return
    if (job.params or {}).get("reason") != PRESTART:
        return
    vm = VirtualMachine.objects.filter(pk=job.vm_id).first()
    if vm is None:
        return
    failures = vm.prestart_failures + 1
    hopeless = job.error_code in NOT_FIXED_BY_RETRYING
    if hopeless:
        failures = max(failures, settings.VMPOOL_MONITOR_MAX_ATTEMPTS)
    VirtualMachine.objects.filter(pk=vm.pk).update(
        prestart_failures=failures, prestart_retry_at=timezone.now() + backoff(failures)
    )
    if failures < settings.VMPOOL_MONITOR_MAX_ATTEMPTS:
        return
    if hopeless:
        why = "failed to prestart in a way no retry can fix"
    else:
        why = f"failed to prestart {failures} times in a row"
    events.alert(
        "vm",
        vm.pk,
        f"VM {vm.name} {why}; the pool skips it until an admin looks at it ({job.error_message})",
        vm_id=vm.pk,
        cluster_id=vm.cluster_id,
        pool_id=vm.pool_id,
    )


def backoff(failures: int) -> timedelta:
    """How long a VM that failed to prestart ``failures`` times in a row waits before the next
    try: the monitor's interval, doubled after each failure, at most an hour."""
    seconds = settings.VMPOOL_MONITOR_INTERVAL * 2 ** max(failures - 1, 0)
    return timedelta(seconds=min(seconds, 3600))
