"""Jobs in the admin console: progress and journal, cancelling, the jobs failed lately, and
django-q2's schedules with the ticker."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobJournal, JobKind
from hosts.operations import OPERATION_BY_KIND
from tests.project.admin.fixtures import (
    admin_url,
    logged_in,
    run_action,
    shown_fields,
    shown_messages,
)

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


def test_the_job_page_shows_each_journal_line_once_timed_to_the_second(superuser_console, noop_job):
    line = JobJournal.objects.get(job=noop_job)
    JobJournal.objects.filter(pk=line.pk).update(at=datetime(2026, 11, 29, 5, 41, 11, tzinfo=UTC))

    response = superuser_console.get(admin_url("hosts.Job", "change", noop_job.pk))

    html = response.content.decode()
    assert html.count("Step 1 &lt;done&gt;") == 1
    row = html[html.index(f'<tr data-line="{line.pk}">') :].split("</tr>")[0]
    assert ">2026-11-29 05:41:11</time>" in row


def test_the_job_page_says_its_progress_and_worker_in_words(superuser_console, noop_job):
    Job.objects.filter(pk=noop_job.pk).update(progress=1.0, worker="vm:15415")

    response = superuser_console.get(admin_url("hosts.Job", "change", noop_job.pk))

    shown = shown_fields(response)
    assert (shown["Progress"], shown["Task worker"]) == ("100 %", "process 15415 on vm")


def placement_rows(response) -> list[tuple[str, str, str]]:
    """(host, verdict, reason) of each row of the job page's placement table."""
    html = response.content.decode()
    table = html[html.index('class="job-placement"') :].split("</table>")[0]
    return [
        tuple(unescape(cell) for cell in cells)
        for cells in re.findall(
            r"<tr data-host=[^>]*><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>", table
        )
    ]


def test_a_start_jobs_page_says_why_this_host_host_by_host(
    superuser_console, running_vm, sim_hosts
):
    job = Job.objects.get(vm=running_vm(), kind=JobKind.START)

    response = superuser_console.get(admin_url("hosts.Job", "change", job.pk))

    weighed = "Total 0: VmAffinityGroups rank 0 × 1, OptimalForEvenMemoryDistribution rank 0 × 1."
    assert placement_rows(response) == [
        ("sim-1", "Chosen", weighed),
        ("sim-2", "Fits (ranked 2)", weighed),
        ("sim-3", "Fits (ranked 3)", weighed),
    ]
    assert '"placement"' not in response.content.decode()  # no JSON blob


def test_a_start_no_host_could_take_says_why_each_host_was_ruled_out(
    superuser_console, sim_vm, sim_hosts
):
    vm = sim_vm(memory_mb=4096)
    job = jobs.submit(JobKind.START, vm=vm)
    assert jobs.run(job.pk, OPERATION_BY_KIND) == "failed"

    response = superuser_console.get(admin_url("hosts.Job", "change", job.pk))

    rows = placement_rows(response)
    assert [(host, verdict) for host, verdict, _ in rows] == [
        ("sim-1", "Ruled out"),
        ("sim-2", "Ruled out"),
        ("sim-3", "Ruled out"),
    ]
    assert all(reason.endswith("(Memory)") for _, _, reason in rows), rows
    assert "No host could take the VM under policy none" in response.content.decode()


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
