"""Jobs in the admin console: progress and journal, cancelling, the jobs failed lately, and
django-q2's schedules with the ticker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobJournal, JobKind
from tests.project.admin.fixtures import admin_url, logged_in, run_action, shown_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def noop_job(make_vm, cluster_a, admin_user):
    job = jobs.submit(JobKind.NOOP, vm=make_vm(cluster_a, name="web-1"), requested_by=admin_user)
    Job.objects.filter(pk=job.pk).update(progress=0.4, step="Step 2 of 5")
    JobJournal.objects.create(job=job, message="Step 1 <done>")
    return job


def test_the_job_list_shows_progress_as_a_bar(superuser_console, noop_job):
    response = superuser_console.get(admin_url("hosts.Job", "changelist"))

    assert '<progress max="100" value="40" title="40%"></progress>' in response.content.decode()


def test_the_job_page_shows_its_journal(superuser_console, noop_job):
    response = superuser_console.get(admin_url("hosts.Job", "change", noop_job.pk))

    html = response.content.decode()
    assert "Step 1 &lt;done&gt;" in html


def test_cancelling_a_pending_job_cancels_it_at_once(superuser_console, noop_job):
    response = run_action(superuser_console, "hosts.Job", "cancel_jobs", [noop_job])

    noop_job.refresh_from_db()
    assert noop_job.state == "cancelled"
    assert ("success", f"Asked 1 job(s) to cancel: #{noop_job.pk}.") in shown_messages(response)


def test_cancelling_a_finished_job_says_there_is_nothing_to_cancel(superuser_console, noop_job):
    Job.objects.filter(pk=noop_job.pk).update(state="succeeded")

    response = run_action(superuser_console, "hosts.Job", "cancel_jobs", [noop_job])

    assert (
        "error",
        f"Job #{noop_job.pk} is succeeded; nothing to cancel.",
    ) in shown_messages(response)


def test_a_job_viewer_may_not_cancel_it(staff_with_role, noop_job, cluster_a):
    viewer = staff_with_role(["hosts.view_job", "hosts.view_virtualmachine"], cluster_a)

    run_action(logged_in(viewer), "hosts.Job", "cancel_jobs", [noop_job])

    noop_job.refresh_from_db()
    assert noop_job.state == "pending"


def test_the_job_list_filters_jobs_failed_in_the_last_hour(superuser_console, noop_job):
    old = jobs.submit(JobKind.NOOP, vm=noop_job.vm, coalesce=False)
    now = timezone.now()
    Job.objects.filter(pk=noop_job.pk).update(state="failed", finished_at=now)
    Job.objects.filter(pk=old.pk).update(state="failed", finished_at=now - timedelta(hours=2))

    response = superuser_console.get(
        admin_url("hosts.Job", "changelist"), {"state__exact": "failed", "finished": "1h"}
    )

    assert [job.pk for job in response.context["cl"].result_list] == [noop_job.pk]


def test_django_q_schedules_show_in_the_console_with_the_ticker(superuser_console):
    index = superuser_console.get(reverse("admin:index"))
    schedules = admin_url("django_q.Schedule", "changelist")

    assert schedules in index.content.decode()
    response = superuser_console.get(schedules)
    assert response.status_code == 200
    assert "corral-ticker" in {schedule.name for schedule in response.context["cl"].result_list}
