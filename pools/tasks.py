"""django-q2 entry points for pools: the prestart monitor's run over every pool (from the
ticker), and its nudges: a run for one pool queued on a task worker now, after an allocation, a
return, a pool change or a VM becoming ready to start, instead of waiting for the ticker's."""

from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from hosts.models import Job, JobKind, VirtualMachine
from pools import monitor
from pools.models import VmPool
from project import loops
from project.workers import queue_task


def register() -> None:
    """The prestart monitor over every pool, every VMPOOL_MONITOR_INTERVAL seconds."""
    loops.register(
        "pool-monitor", monitor.run_for_all_pools, every=lambda: settings.VMPOOL_MONITOR_INTERVAL
    )


def run_monitor_on_nudge(pool_id: int) -> int:
    """The task a nudge queues: one monitor run over the pool; VMs started."""
    close_old_connections()
    return run_nudged(pool_id)


def run_nudged(pool_id: int) -> int:
    """A nudge's monitor run (``run_monitor_on_nudge`` without its closing of stale
    connections); VMs started.

    One nudge may stand for a whole burst of allocations: a run that started a full batch may
    leave the pool short still, so it queues the next run at once instead of leaving the rest
    to the ticker. The chain ends with the first run that starts less than a batch.
    """
    started = monitor.run_for_pool(pool_id)
    if started >= settings.VMPOOL_MONITOR_BATCH_SIZE > 0:
        nudge_monitor(pool_id)
    return started


def nudge_monitor(pool_id: int, *, coalesce: bool = False) -> None:
    """Run the pool's monitor now, on a task worker (after an allocation or a pool change).

    With ``coalesce`` (allocations), at most one nudge per pool is queued every
    ``VMPOOL_NUDGE_INTERVAL`` seconds, across every process: the first caller of an interval
    claims it with a conditional UPDATE of the pool's ``nudge_due_at``, the others queue
    nothing (the monitor run they would queue counts everything at once anyway, and the
    ticker's run follows within ``VMPOOL_MONITOR_INTERVAL``).
    """
    if coalesce and not _claim_nudge(pool_id):
        return
    # With the broker down, the ticker's monitor run starts the VMs instead.
    queue_task(run_monitor_on_nudge, pool_id, task_name=f"prestart-{pool_id}")


def _claim_nudge(pool_id: int) -> bool:
    """True for the one caller per pool and interval that may queue a nudge."""
    now = timezone.now()
    due = VmPool.objects.filter(pk=pool_id).filter(
        Q(nudge_due_at__isnull=True) | Q(nudge_due_at__lte=now)
    )
    interval = timedelta(seconds=settings.VMPOOL_NUDGE_INTERVAL)
    return bool(due.update(nudge_due_at=now + interval))


def nudge_when_ready(sender=None, job: Job | None = None, **kwargs) -> None:
    """``job_finished``: a VM that became ready to start (prepared, or reverted after a return)
    nudges its pool's monitor: a monitor run while the VM was busy could not start it."""
    if job is None or job.vm_id is None or job.state != "succeeded":
        return
    if job.kind not in (JobKind.PREPARE, JobKind.REVERT):
        return
    pool_id = VirtualMachine.objects.filter(pk=job.vm_id).values_list("pool_id", flat=True)
    if pool_id and pool_id[0]:
        nudge_monitor(pool_id[0])
