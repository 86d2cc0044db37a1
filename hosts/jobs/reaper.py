"""The reaper: fails running jobs that cannot end well (their worker died or stalled, or they
ran too long), settles their VMs, and hands pending jobs whose dispatch was lost over again."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hosts.error_codes import JobErrorCode
from hosts.jobs.context import job_event, log_extra, logger
from hosts.jobs.dispatch import dispatch_next
from hosts.jobs.settle import finish_vm
from hosts.models import Job, JobJournal, JobState
from hosts.models.jobs import RUNNING_JOB_STATES
from hosts.signals import job_finished


def _dead_here(worker: str) -> bool:
    """Whether ``worker`` ("host:pid") ran on this machine and its process is gone (its task
    cluster was killed and restarted): no need to wait for its heartbeat to go stale."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _why_reap(job: Job, stale, too_old) -> tuple[str, str, dict, str] | None:
    """(error code, message, the condition that must still hold when failing it, a note for
    the journal) when the running ``job`` must be failed, else None."""
    if job.heartbeat_at is not None and job.heartbeat_at < stale:
        return (
            JobErrorCode.WORKER_LOST,
            f"The worker running this job ({job.worker}) stopped responding; "
            "the VM was set to what its host reports.",
            {"heartbeat_at__lt": stale},
            "its worker stopped responding",
        )
    if _dead_here(job.worker):
        return (
            JobErrorCode.WORKER_LOST,
            f"The worker running this job ({job.worker}) is gone (its task cluster stopped); "
            "the VM was set to what its host reports.",
            {"worker": job.worker},
            "its worker is gone",
        )
    if job.started_at is not None and job.started_at < too_old:
        limit = settings.CORRAL_JOB_MAX_SECONDS
        return (
            JobErrorCode.TIMEOUT,
            f"The job ran longer than {limit:g} s (CORRAL_JOB_MAX_SECONDS); "
            "the VM was set to what its host reports.",
            {"started_at__lt": too_old},
            f"it ran longer than {limit:g} s",
        )
    return None


def reap() -> list[int]:
    """Fail running jobs that cannot end well; re-dispatch lost pending jobs.

    A running job is failed when its worker stopped heartbeating, when its worker's process on
    this machine is gone (a task cluster killed and restarted: no wait for the heartbeat), or
    when it has run longer than ``CORRAL_JOB_MAX_SECONDS`` (so no VM stays Starting, Stopping
    or Migrating longer than that; a worker still on it stops at its next step). The VM of a
    failed job is set to the stationary state its host reports.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.CORRAL_JOB_HEARTBEAT_TIMEOUT)
    too_old = now - timedelta(seconds=settings.CORRAL_JOB_MAX_SECONDS)
    reaped = []
    # Only the jobs one of the reasons may apply to: stale, too old, or run on this machine.
    suspects = Job.objects.filter(state__in=RUNNING_JOB_STATES).filter(
        Q(heartbeat_at__lt=stale)
        | Q(started_at__lt=too_old)
        | Q(worker__startswith=f"{socket.gethostname()}:")
    )
    for job in suspects.order_by("pk"):
        why = _why_reap(job, stale, too_old)
        if why is None:
            continue
        code, message, still, note = why
        if job.vm_id is not None:
            # Settle the VM first, so nobody sees the job failed while its VM is still Starting.
            finish_vm(job.vm_id, succeeded=False)
        with transaction.atomic():
            updated = Job.objects.filter(pk=job.pk, state__in=RUNNING_JOB_STATES, **still).update(
                state=JobState.FAILED,
                error_code=code,
                error_message=message,
                finished_at=timezone.now(),
            )
            if not updated:
                continue
            JobJournal.objects.create(job=job, message=f"Failed: {note}")
            logger.warning("job %s failed: %s", job.pk, message, extra=log_extra(job))
            job.refresh_from_db()
            job_event(job)
            transaction.on_commit(lambda job=job: job_finished.send(sender=Job, job=job))
        if job.vm_id is not None:
            dispatch_next(vm_id=job.vm_id)
        reaped.append(job.pk)
    lost = timezone.now() - timedelta(seconds=settings.CORRAL_JOB_DISPATCH_RETRY)
    for vm_id in (
        Job.objects.filter(state=JobState.PENDING, vm__isnull=False)
        .exclude(dispatched_at__gt=lost)
        .values_list("vm_id", flat=True)
        .distinct()
    ):
        dispatch_next(vm_id=vm_id)
    return reaped
