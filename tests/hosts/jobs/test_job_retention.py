"""Retention of jobs as time passes: finished jobs past CORRAL_JOB_RETENTION_HOURS go with
their journals, through the periodic loop; queued and running jobs stay however old."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobJournal, JobKind, JobState
from project import loops

pytestmark = pytest.mark.django_db


def _job(vm, state: str, *, journal: int = 2) -> Job:
    job = jobs.submit(JobKind.START, vm=vm, coalesce=False)
    finished = timezone.now() if state in (JobState.SUCCEEDED, JobState.FAILED) else None
    Job.objects.filter(pk=job.pk).update(state=state, finished_at=finished)
    JobJournal.objects.bulk_create(JobJournal(job=job, message=f"line {n}") for n in range(journal))
    return job


def test_the_loop_deletes_finished_jobs_past_the_retention_with_their_journals(
    settings, time_machine, make_vm, admin_user, client_for
):
    settings.CORRAL_JOB_RETENTION_HOURS = 24
    time_machine.move_to(timezone.now(), tick=False)
    vm, other = make_vm(), make_vm()
    done, failed = _job(vm, JobState.SUCCEEDED), _job(other, JobState.FAILED)
    time_machine.shift(timedelta(hours=25))
    recent = _job(vm, JobState.SUCCEEDED)

    loops.get("prune-jobs").run()

    assert list(Job.objects.values_list("pk", flat=True)) == [recent.pk]
    assert set(JobJournal.objects.values_list("job_id", flat=True)) == {recent.pk}
    client = client_for(admin_user)
    assert client.get(f"/api/jobs/{done.pk}/").status_code == 404
    assert client.get(f"/api/jobs/{failed.pk}/").status_code == 404
    assert client.get(f"/api/jobs/{recent.pk}/").status_code == 200


def test_queued_and_running_jobs_stay_however_old(settings, time_machine, make_vm):
    settings.CORRAL_JOB_RETENTION_HOURS = 1
    time_machine.move_to(timezone.now(), tick=False)
    running = _job(make_vm(), JobState.RUNNING)
    pending = _job(make_vm(), JobState.PENDING)
    cancelling = _job(make_vm(), JobState.CANCELLING)
    time_machine.shift(timedelta(days=30))

    assert loops.get("prune-jobs").run() == 0

    assert set(Job.objects.values_list("pk", flat=True)) == {running.pk, pending.pk, cancelling.pk}
    assert JobJournal.objects.count() == 6
