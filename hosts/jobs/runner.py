"""Running one job: claim it if it heads its VM's queue, run its operation's steps under a
heartbeat, settle its VM, record the outcome and hand the VM's next job over.

The caller hands over the operation of each job kind (``hosts.tasks.run_job`` passes
``hosts.operations.OPERATION_BY_KIND``): the runner knows no operation by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.db import transaction
from django.utils import timezone

from hosts.error_codes import JobErrorCode
from hosts.jobs.context import (
    Heartbeat,
    JobCancelled,
    JobContext,
    JobFailed,
    JobLost,
    host_detail,
    job_event,
    log_extra,
    logger,
)
from hosts.jobs.dispatch import dispatch_next
from hosts.jobs.settle import changed_outside, finish_vm
from hosts.models import Job, JobState, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES, RUNNING_JOB_STATES
from hosts.signals import job_finished
from project import events
from project.workers import worker_name

Operation = Callable[[JobContext], dict | None]
UNEXPECTED = "The job stopped on an unexpected error; the admins find it in its journal."


def claim(job_id: int) -> Job | None:
    """Mark the job running if it is the head of its VM's queue; None if it must not run now."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.state != JobState.PENDING:
            return None
        if job.vm_id is not None:
            VirtualMachine.objects.select_for_update(of=("self",)).filter(pk=job.vm_id).first()
            earlier = Job.objects.filter(
                vm_id=job.vm_id, id__lt=job.pk, state__in=ACTIVE_JOB_STATES
            ).exists()
            running = Job.objects.filter(vm_id=job.vm_id, state__in=RUNNING_JOB_STATES).exists()
            if earlier or running:
                Job.objects.filter(pk=job.pk).update(dispatched_at=None)
                return None
        now = timezone.now()
        job.state, job.started_at, job.heartbeat_at = JobState.RUNNING, now, now
        job.worker = worker_name()
        job.save(update_fields=["state", "started_at", "heartbeat_at", "worker"])
        job_event(job)
    return job


def run(job_id: int, operations: Mapping[str, Operation]) -> str:
    """Run one job to its end with ``operations[job.kind]``. Returns its final state."""
    job = claim(job_id)
    if job is None:
        return "skipped"
    operation = operations[job.kind]
    context = JobContext(job)
    extra = log_extra(job)
    logger.info("job %s (%s) started", job.pk, job.kind, extra=extra)
    state, result, error_code, error_message = JobState.SUCCEEDED, None, "", ""
    error_detail = ""
    lost = False
    settled = None
    with Heartbeat(job.pk):
        try:
            result = operation(context)
        except JobLost:
            lost = True
        except JobCancelled:
            state = JobState.CANCELLED
            context.log("Cancelled between steps")
        except JobFailed as exc:
            state, error_code, error_message = JobState.FAILED, exc.code, exc.message
            result = exc.result
            error_detail = host_detail(exc)
            context.log(f"Failed: {exc.message}", detail=error_detail)
        except Exception as exc:  # a bug or an unexpected libvirt answer: fail, never hang
            logger.exception("job %s crashed", job.pk, extra=extra)
            # What went wrong is the admins' to read (the journal, the server log), not users'.
            state, error_code, error_message = (
                JobState.FAILED,
                JobErrorCode.INTERNAL_ERROR,
                UNEXPECTED,
            )
            error_detail = f"{type(exc).__name__}: {exc}"
            context.log(f"Failed: {UNEXPECTED}", detail=error_detail)
        finally:
            # A job failed meanwhile by the reaper (it ran too long, say, in one long call) is
            # lost too: its VM was settled then and may be another job's by now.
            lost = lost or not Job.objects.filter(pk=job.pk, state__in=RUNNING_JOB_STATES).exists()
            if job.vm_id is not None and not lost:
                settled = finish_vm(job.vm_id, succeeded=state == JobState.SUCCEEDED)
    if lost:
        logger.warning(
            "job %s (%s) was failed by the reaper while it ran; it stops here",
            job.pk,
            job.kind,
            extra=extra,
        )
        return "lost"
    if state == JobState.SUCCEEDED and settled is not None:
        # The host's final word on the VM must be what the job did: an outside change that
        # came after the job's own wait (during its last hooks, say) contradicts it.
        contradiction = changed_outside(job.kind, settled)
        if contradiction:
            state, error_code, error_message = (
                JobState.FAILED,
                JobErrorCode.CHANGED_OUTSIDE,
                contradiction,
            )
            context.log(f"Failed: {contradiction}")
            events.alert(
                "vm",
                settled.pk,
                contradiction,
                vm_id=settled.pk,
                cluster_id=settled.cluster_id,
                pool_id=settled.pool_id,
            )
    if context.placement is not None and "placement" not in (result or {}):
        result = {**(result or {}), "placement": context.placement}
    finish(job, state, result, error_code, error_message, error_detail)
    logger.info("job %s (%s) %s", job.pk, job.kind, state, extra=extra)
    return state


def finish(
    job: Job, state: str, result, error_code: str, error_message: str, error_detail: str = ""
) -> None:
    """Record the job's outcome (unless the reaper already did) and hand its VM's next job
    over. ``error_detail``: the hosts' own words behind a failure, for those who see hosts."""
    with transaction.atomic():
        updated = Job.objects.filter(pk=job.pk, state__in=RUNNING_JOB_STATES).update(
            state=state,
            progress=1.0 if state == JobState.SUCCEEDED else job.progress,
            result=result,
            error_code=error_code,
            error_message=error_message[:5000],
            error_detail=error_detail[:5000],
            finished_at=timezone.now(),
        )
        if updated:
            job.refresh_from_db()
            job_event(job)
            transaction.on_commit(lambda: job_finished.send(sender=Job, job=job))
        transaction.on_commit(lambda: dispatch_next(vm_id=job.vm_id, job_id=job.pk))
