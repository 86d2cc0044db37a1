"""The job runner: submit, serialize per VM, run step by step, heartbeat, cancel, reap.

A job is submitted as a Pending row. Jobs on one VM form a queue in id order: only its head
is handed to a task worker, and when it finishes the next one is. A second identical request
while one is still pending at the tail of the queue is answered with that job (CloudStack's
coalescing). The worker runs the operation's steps, journalling each, checking for
cancellation between steps and heartbeating; a job whose heartbeat goes stale (its worker
died) is failed by ``reap()``, and its VM set to what its host reports.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from hosts.models import Job, JobJournal, JobKind, JobState, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES, RUNNING_JOB_STATES
from hosts.signals import job_finished
from project import events
from project.models import EventKind

logger = logging.getLogger(__name__)


class JobCancelled(Exception):
    """The job was cancelled between two steps."""


class JobLost(Exception):
    """The job is no longer this worker's: the reaper failed it while the worker was stalled
    (a frozen machine, a long pause). The worker stops at its next step and touches nothing."""


class JobFailed(Exception):
    """A step failed; ``code`` is stable for clients, the message is for people."""

    def __init__(self, code: str, message: str, result: dict | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.result = result


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def log_extra(job: Job) -> dict:
    """The job's ids for a log record (``extra=``): a JSON log line carries them as fields."""
    return {"job_id": job.pk, "job_kind": job.kind, "vm_id": job.vm_id}


def _job_event(job: Job, message: str = "") -> None:
    vm = job.vm
    events.emit(
        EventKind.JOB,
        "job",
        job.pk,
        message or f"{job.get_kind_display()} {job.get_state_display().lower()}",
        {"state": job.state, "progress": job.progress, "step": job.step, "kind": job.kind},
        vm_id=job.vm_id,
        cluster_id=vm.cluster_id if vm else (job.host.cluster_id if job.host else None),
        pool_id=vm.pool_id if vm else None,
        user_id=job.requested_by_id,
    )


# -- submission and dispatch -----------------------------------------------------------------


def submit(
    kind: str,
    *,
    vm: VirtualMachine | None = None,
    host=None,
    params: dict | None = None,
    requested_by=None,
    coalesce: bool = True,
) -> Job:
    """Queue a job; returns it (or the identical pending job at the tail of the VM's queue it
    was coalesced into)."""
    params = params or {}
    with transaction.atomic():
        if vm is not None:
            # The VM row is the queue's lock: submissions and dispatches for it take turns.
            vm = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
            if coalesce:
                # Only into the tail of the queue: coalescing past a job queued after it
                # (start, shutdown, start) would reorder what the user asked for.
                tail = (
                    Job.objects.filter(vm=vm, state__in=ACTIVE_JOB_STATES).order_by("-id").first()
                )
                if (
                    tail is not None
                    and tail.state == JobState.PENDING
                    and tail.kind == kind
                    and tail.params == params
                ):
                    Job.objects.filter(pk=tail.pk).update(coalesced=tail.coalesced + 1)
                    tail.refresh_from_db()
                    return tail
        job = Job.objects.create(
            kind=kind,
            vm=vm,
            host=host,
            params=params,
            requested_by=requested_by,
            target_name=str(vm or host or ""),
        )
        _job_event(job, f"{job.get_kind_display()} requested")
        transaction.on_commit(lambda: dispatch_next(vm_id=job.vm_id, job_id=job.pk))
    return job


def submit_many(
    kind: str, vms: list[VirtualMachine], *, params: dict | None = None, requested_by=None
) -> list[Job]:
    """Queue one ``kind`` job on each of ``vms`` that has no queued or running job, in a few
    queries for any number of VMs (the prestart monitor starts hundreds at once).

    Each new job heads its VM's queue, so it is handed to a worker at once; VMs that already
    have a job are skipped (their queue decides), as are VMs deleted meanwhile.
    """
    from django_q.tasks import async_task

    params = params or {}
    with transaction.atomic():
        ids = list(
            VirtualMachine.objects.select_for_update(of=("self",))
            .filter(pk__in=[vm.pk for vm in vms])
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        busy = set(
            Job.objects.filter(vm_id__in=ids, state__in=ACTIVE_JOB_STATES).values_list(
                "vm_id", flat=True
            )
        )
        free = [vm for vm in vms if vm.pk in set(ids) - busy]
        now = timezone.now()
        created = Job.objects.bulk_create(
            Job(
                kind=kind,
                vm=vm,
                params=params,
                requested_by=requested_by,
                target_name=str(vm),
                dispatched_at=now,
            )
            for vm in free
        )
        if not created:
            return []
        if created[0].pk is None:  # a backend that returns no ids from a bulk insert
            created = list(
                Job.objects.filter(vm__in=free, kind=kind, dispatched_at=now).order_by("vm_id")
            )
        label = JobKind(kind).label
        events.emit_many(
            [
                dict(
                    kind=EventKind.JOB,
                    object_type="job",
                    object_id=job.pk,
                    message=f"{label} requested",
                    data={"state": job.state, "progress": 0.0, "step": "", "kind": kind},
                    vm_id=job.vm_id,
                    cluster_id=job.vm.cluster_id,
                    pool_id=job.vm.pool_id,
                    user_id=job.requested_by_id,
                )
                for job in created
            ]
        )

        def hand_over(jobs=tuple(created)):
            for job in jobs:
                async_task("hosts.tasks.run_job", job.pk, task_name=f"job-{job.pk}")

        transaction.on_commit(hand_over)
    return created


def dispatch_next(*, vm_id: int | None = None, job_id: int | None = None) -> Job | None:
    """Hand the head of a VM's queue (or a VM-less job) to a task worker, once."""
    from django_q.tasks import async_task

    retry_after = timezone.now() - timedelta(seconds=settings.CORRAL_JOB_DISPATCH_RETRY)
    with transaction.atomic():
        if vm_id is not None:
            # of=self: the VM's default ordering joins its cluster, whose row is the
            # scheduling lock; the queue's lock is the VM row alone.
            VirtualMachine.objects.select_for_update(of=("self",)).filter(pk=vm_id).first()
            if Job.objects.filter(vm_id=vm_id, state__in=RUNNING_JOB_STATES).exists():
                return None
            head = Job.objects.filter(vm_id=vm_id, state=JobState.PENDING).order_by("id").first()
        else:
            head = Job.objects.select_for_update().filter(pk=job_id, state=JobState.PENDING).first()
        if head is None or (head.dispatched_at and head.dispatched_at > retry_after):
            return None
        Job.objects.filter(pk=head.pk).update(dispatched_at=timezone.now())
        transaction.on_commit(
            lambda: async_task("hosts.tasks.run_job", head.pk, task_name=f"job-{head.pk}")
        )
    return head


# -- running -----------------------------------------------------------------------------------


class JobContext:
    """What an operation's steps use: progress, journal, cancellation, the job's VM."""

    def __init__(self, job: Job):
        self.job = job
        self.vm = job.vm
        # The placement decision, once made: kept in the job's result whatever the outcome.
        self.placement: dict | None = None

    def step(self, label: str, progress: float) -> None:
        """Begin a step: check for cancellation, record it, move the progress bar."""
        self.check_cancelled()
        now = timezone.now()
        Job.objects.filter(pk=self.job.pk).update(step=label, progress=progress, heartbeat_at=now)
        self.job.step, self.job.progress = label, progress
        JobJournal.objects.create(job=self.job, message=label)
        logger.info("%s", label, extra=log_extra(self.job))
        _job_event(self.job, label)

    def log(self, message: str) -> None:
        JobJournal.objects.create(job=self.job, message=message)
        logger.info("%s", message, extra=log_extra(self.job))

    def check_cancelled(self) -> None:
        """Stop at a step boundary when a cancel was asked, or when the job is no longer this
        worker's (the reaper failed it while the worker was stalled)."""
        state = Job.objects.filter(pk=self.job.pk).values_list("state", flat=True).first()
        if state == JobState.CANCELLING:
            raise JobCancelled()
        if state not in RUNNING_JOB_STATES:
            raise JobLost()

    def refresh_vm(self) -> VirtualMachine:
        self.vm.refresh_from_db()
        return self.vm


class _Heartbeat:
    """Touches the job's heartbeat on a thread while a step blocks (on libvirt, a hook…)."""

    def __init__(self, job_id: int):
        self._job_id = job_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(settings.CORRAL_JOB_HEARTBEAT_INTERVAL):
                Job.objects.filter(pk=self._job_id, state__in=RUNNING_JOB_STATES).update(
                    heartbeat_at=timezone.now()
                )
        finally:
            connection.close()


def _claim(job_id: int) -> Job | None:
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
        _job_event(job)
    return job


def run(job_id: int) -> str:
    """Run one job to its end (the django-q2 task body). Returns its final state."""
    from hosts.operations import OPERATIONS, changed_outside, finish_vm

    job = _claim(job_id)
    if job is None:
        return "skipped"
    operation: Callable[[JobContext], dict | None] = OPERATIONS[job.kind]
    context = JobContext(job)
    extra = log_extra(job)
    logger.info("job %s (%s) started", job.pk, job.kind, extra=extra)
    state, result, error_code, error_message = JobState.SUCCEEDED, None, "", ""
    lost = False
    settled = None
    with _Heartbeat(job.pk):
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
            context.log(f"Failed: {exc.message}")
        except Exception as exc:  # a bug or an unexpected libvirt answer: fail, never hang
            logger.exception("job %s crashed", job.pk, extra=extra)
            state, error_code, error_message = JobState.FAILED, "internal_error", str(exc)
            context.log(f"Failed: {exc}")
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
            state, error_code, error_message = JobState.FAILED, "changed_outside", contradiction
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
    _finish(job, state, result, error_code, error_message)
    logger.info("job %s (%s) %s", job.pk, job.kind, state, extra=extra)
    return state


def _finish(job: Job, state: str, result, error_code: str, error_message: str) -> None:
    with transaction.atomic():
        updated = Job.objects.filter(pk=job.pk, state__in=RUNNING_JOB_STATES).update(
            state=state,
            progress=1.0 if state == JobState.SUCCEEDED else job.progress,
            result=result,
            error_code=error_code,
            error_message=error_message[:5000],
            finished_at=timezone.now(),
        )
        if updated:
            job.refresh_from_db()
            _job_event(job)
            transaction.on_commit(lambda: job_finished.send(sender=Job, job=job))
        transaction.on_commit(lambda: dispatch_next(vm_id=job.vm_id, job_id=job.pk))


# -- cancel and reap -----------------------------------------------------------------------------


def request_cancel(job: Job) -> Job:
    """Cancel a pending job at once; ask a running one to stop at its next step boundary."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state == JobState.PENDING:
            job.state, job.finished_at = JobState.CANCELLED, timezone.now()
            job.save(update_fields=["state", "finished_at"])
            JobJournal.objects.create(job=job, message="Cancelled before it started")
            _job_event(job)
            transaction.on_commit(lambda: dispatch_next(vm_id=job.vm_id))
        elif job.state == JobState.RUNNING:
            job.state = JobState.CANCELLING
            job.save(update_fields=["state"])
            JobJournal.objects.create(job=job, message="Cancellation requested")
            _job_event(job)
    return job


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
            "worker_lost",
            f"The worker running this job ({job.worker}) stopped responding; "
            "the VM was set to what its host reports.",
            {"heartbeat_at__lt": stale},
            "its worker stopped responding",
        )
    if _dead_here(job.worker):
        return (
            "worker_lost",
            f"The worker running this job ({job.worker}) is gone (its task cluster stopped); "
            "the VM was set to what its host reports.",
            {"worker": job.worker},
            "its worker is gone",
        )
    if job.started_at is not None and job.started_at < too_old:
        limit = settings.CORRAL_JOB_MAX_SECONDS
        return (
            "timeout",
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
    from hosts.operations import finish_vm

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
            _job_event(job)
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


__all__ = [
    "JobKind",
    "JobState",
    "submit",
    "submit_many",
    "run",
    "request_cancel",
    "reap",
    "dispatch_next",
]
