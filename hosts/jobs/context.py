"""What a running job's steps work with: its context (progress, journal, cancellation), the
heartbeat that shows its worker is alive, and the ways a job ends early."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from hosts.driver import DriverError
from hosts.error_codes import JobErrorCode
from hosts.models import Job, JobJournal, JobState, VirtualMachine
from hosts.models.jobs import RUNNING_JOB_STATES
from project import events
from project.models import EventKind

# One logger for the whole runner: operators filter its lines by this name.
logger = logging.getLogger("hosts.jobs")


class JobCancelled(Exception):
    """The job was cancelled between two steps."""


class JobLost(Exception):
    """The job is no longer this worker's: the reaper failed it while the worker was stalled
    (a frozen machine, a long pause). The worker stops at its next step and touches nothing."""


class JobFailed(Exception):
    """A step failed; ``code`` is stable for clients (a ``JobErrorCode``, or a host driver's
    code, which ``JobErrorCode`` lists too), the message is for people; ``detail``, when given,
    is the hosts' own words behind it (else those of the driver error it was raised from)."""

    def __init__(self, code: str, message: str, result: dict | None = None, detail: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.result = result
        self.detail = detail


def host_detail(exc: BaseException | None) -> str:
    """The host's own words behind ``exc`` (a ``JobFailed``'s own, or those of the
    ``DriverError`` it was raised from, however deep), for the admins; "" when no host said
    anything."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, DriverError | JobFailed) and exc.detail:
            return exc.detail
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return ""


def log_extra(job: Job) -> dict:
    """The job's ids for a log record (``extra=``): a JSON log line carries them as fields."""
    return {"job_id": job.pk, "job_kind": job.kind, "vm_id": job.vm_id}


def job_event_row(job: Job, message: str = "", vm: VirtualMachine | None = None) -> dict:
    """The job's state as an event (``events.emit``'s arguments by name), scoped to its VM,
    cluster, pool and requester; ``vm``: the job's VM when the caller holds it already."""
    vm = vm or job.vm
    return dict(
        kind=EventKind.JOB,
        object_type="job",
        object_id=job.pk,
        message=message or f"{job.get_kind_display()} {job.get_state_display().lower()}",
        data={"state": job.state, "progress": job.progress, "step": job.step, "kind": job.kind},
        vm_id=job.vm_id,
        cluster_id=vm.cluster_id if vm else (job.host.cluster_id if job.host else None),
        pool_id=vm.pool_id if vm else None,
        user_id=job.requested_by_id,
    )


def requested(job: Job, vm: VirtualMachine | None = None) -> dict:
    """The event of a job just queued ("Start requested")."""
    return job_event_row(job, f"{job.get_kind_display()} requested", vm)


def job_event(job: Job, message: str = "") -> None:
    """The job's state in the event feed (``job_event_row``)."""
    events.emit(**job_event_row(job, message))


class JobContext:
    """What an operation's steps use: progress, journal, cancellation, the job's VM."""

    def __init__(self, job: Job):
        self.job = job
        self._vm = job.vm
        # The placement decision, once made: kept in the job's result whatever the outcome.
        self.placement: dict | None = None

    def step(self, label: str, progress: float) -> None:
        """Begin a step: check for cancellation, record it, move the progress bar."""
        now = timezone.now()
        # The step and its journal line together, and only while the job runs on: the update
        # itself is the check, so a cancel asked for, or a reaper that failed the job while this
        # worker stalled, stops it here without a step after it.
        with transaction.atomic():
            moved = Job.objects.filter(pk=self.job.pk, state=JobState.RUNNING).update(
                step=label, progress=progress, heartbeat_at=now
            )
            if moved:
                JobJournal.objects.create(job=self.job, message=label)
        if not moved:
            self.check_cancelled()
            raise JobLost()
        self.job.step, self.job.progress = label, progress
        logger.info("%s", label, extra=log_extra(self.job))
        job_event(self.job, label)

    def log(self, message: str, *, detail: str = "") -> None:
        """A journal line in words for everyone who sees the job; ``detail`` (the host's own
        words) goes with it to the admin console and the server log only."""
        JobJournal.objects.create(job=self.job, message=message, detail=detail)
        if detail:
            logger.info("%s [%s]", message, detail, extra=log_extra(self.job))
        else:
            logger.info("%s", message, extra=log_extra(self.job))

    def check_cancelled(self) -> None:
        """Stop at a step boundary when a cancel was asked, or when the job is no longer this
        worker's (the reaper failed it while the worker was stalled)."""
        state = Job.objects.filter(pk=self.job.pk).values_list("state", flat=True).first()
        if state == JobState.CANCELLING:
            raise JobCancelled()
        if state not in RUNNING_JOB_STATES:
            raise JobLost()

    @property
    def vm(self) -> VirtualMachine:
        """The job's VM; a job whose VM was deleted before it ran fails here, with a reason."""
        if self._vm is None:
            name = f" {self.job.target_name}" if self.job.target_name else ""
            raise JobFailed(
                JobErrorCode.VM_GONE, f"The VM{name} was deleted before this job could run"
            )
        return self._vm

    def refresh_vm(self) -> VirtualMachine:
        try:
            self.vm.refresh_from_db()
        except VirtualMachine.DoesNotExist:  # deleted while the job ran
            self._vm = None
            return self.vm
        return self._vm


class Heartbeat:
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
