"""A VM's queue of jobs: submit (coalescing an identical pending request), hand its head to a
task worker, cancel.

Jobs on one VM form a queue in id order: only its head is handed to a task worker, and when it
finishes the next one is. The VM row is the queue's lock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts.jobs.context import job_event, requested
from hosts.models import Job, JobJournal, JobState, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES, RUNNING_JOB_STATES
from hosts.signals import job_finished
from project import events
from project.workers import queue_task

# The django-q2 task that runs a job, ``hosts.tasks.run_job``: it hands the runner the
# operations, so it sits above this module, and the hosts app hands it down from its ready()
# (``run_jobs_with``) instead of this module importing upward. django-q2 stores its dotted path
# with every queued task, so that path stays the same across upgrades.
_run_job_task: list[Callable[[int], str]] = []


def run_jobs_with(task: Callable[[int], str]) -> None:
    """Queue every job run as ``task(job_id)`` (``hosts.tasks.run_job``, from hosts' ready())."""
    _run_job_task[:] = [task]


def queue_run(job_ids) -> None:
    """Hand jobs to the task workers, now (call it once their rows are committed): the one
    place a job run is queued. A job the broker cannot take now (Redis restarting) stays
    pending: the reaper hands it over again once CORRAL_JOB_DISPATCH_RETRY has passed."""
    [run_job] = _run_job_task
    for job_id in job_ids:
        queue_task(run_job, job_id, task_name=f"job-{job_id}")


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
        events.emit(**requested(job, vm))
        transaction.on_commit(lambda: dispatch_next(vm_id=job.vm_id, job_id=job.pk))
    return job


def submit_to_idle_vm(
    kind: str,
    vm: VirtualMachine,
    *,
    params: dict | None = None,
    requested_by=None,
    also_emit: list[dict] = (),
) -> Job:
    """Queue a job on a VM the caller has locked and found with no queued or running job, in
    two statements: the job, and its event with ``also_emit`` (``events.emit_many`` rows) in
    one insert. The job heads the VM's queue, so it is handed to a task worker at commit.

    For a hot path that has just locked and checked the VM (an allocation); anything else
    goes through ``submit``, which locks and looks for itself.
    """
    params = params or {}
    job = Job.objects.create(
        kind=kind,
        vm=vm,
        params=params,
        requested_by=requested_by,
        target_name=str(vm),
        dispatched_at=timezone.now(),
    )
    events.emit_many([requested(job, vm), *also_emit])
    transaction.on_commit(lambda: queue_run([job.pk]))
    return job


def submit_many(
    kind: str, vms: list[VirtualMachine], *, params: dict | None = None, requested_by=None
) -> list[Job]:
    """Queue one ``kind`` job on each of ``vms`` that has no queued or running job, in a few
    queries for any number of VMs (the prestart monitor starts hundreds at once).

    Each new job heads its VM's queue, so it is handed to a worker at once; VMs that already
    have a job are skipped (their queue decides), as are VMs deleted meanwhile.
    """
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
        events.emit_many([requested(job, job.vm) for job in created])
        transaction.on_commit(lambda jobs=tuple(created): queue_run(job.pk for job in jobs))
    return created


def dispatch_next(*, vm_id: int | None = None, job_id: int | None = None) -> Job | None:
    """Hand the head of a VM's queue (or a VM-less job) to a task worker, once."""
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
        transaction.on_commit(lambda: queue_run([head.pk]))
    return head


def request_cancel(job: Job, why: str = "") -> Job:
    """Cancel a pending job at once; ask a running one to stop at its next step boundary.
    ``why`` goes into its journal ("Cancellation requested" when none is given)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state == JobState.PENDING:
            job.state, job.finished_at = JobState.CANCELLED, timezone.now()
            job.save(update_fields=["state", "finished_at"])
            JobJournal.objects.create(job=job, message=why or "Cancelled before it started")
            job_event(job)
            transaction.on_commit(lambda: job_finished.send(sender=Job, job=job))
            transaction.on_commit(lambda: dispatch_next(vm_id=job.vm_id))
        elif job.state == JobState.RUNNING:
            job.state = JobState.CANCELLING
            job.save(update_fields=["state"])
            JobJournal.objects.create(job=job, message=why or "Cancellation requested")
            job_event(job)
    return job
