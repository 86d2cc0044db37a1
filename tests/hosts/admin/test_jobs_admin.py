"""Pools, jobs and events in the admin console: the counts an operator needs, following and
cancelling jobs, the alert feed, and django-q2's schedules."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobJournal, JobKind
from project.events import alert, emit
from project.models import Event
from tests.pools.fixtures import add_pool_vms
from tests.project.admin.fixtures import admin_url, logged_in, run_action, shown_messages

pytestmark = pytest.mark.django_db


# --- pools --------------------------------------------------------------------------------


@pytest.fixture
def lab_pool(make_pool, make_user, cluster_a):
    """A pool wanting 3 prestarted VMs: 1 up, 1 starting, 1 down, 2 taken by a user."""
    pool = make_pool(cluster_a, name="lab", size=5, prestarted_vms=3)
    add_pool_vms(pool, ["up", "starting", "down"])
    add_pool_vms(pool, ["up", "down"], owner=make_user())
    return pool


def pool_row(response, pool):
    return next(row for row in response.context["cl"].result_list if row.pk == pool.pk)


def test_the_pool_list_shows_total_running_assigned_and_starting_vms(superuser_console, lab_pool):
    response = superuser_console.get(admin_url("pools.VmPool", "changelist"))

    row = pool_row(response, lab_pool)
    assert (row.total_vms, row.running_unassigned, row.assigned_vms, row.starting_vms) == (
        5,
        1,
        2,
        1,
    )
    html = response.content.decode()
    for column in ("Running, unassigned", "Starting", "Assigned"):
        assert f">{column}</a>" in html


def test_the_pool_list_filters_pools_below_their_prestarted_level(
    superuser_console, lab_pool, make_pool, cluster_a
):
    full = make_pool(cluster_a, name="full", size=1, prestarted_vms=1)
    add_pool_vms(full, ["up"])

    response = superuser_console.get(
        admin_url("pools.VmPool", "changelist"), {"prestarted": "short"}
    )

    assert [pool.name for pool in response.context["cl"].result_list] == ["lab"]


def test_prestart_now_needs_the_right_to_change_the_pool(staff_with_role, lab_pool):
    viewer = staff_with_role(["pools.view_vmpool"], lab_pool)

    response = run_action(logged_in(viewer), "pools.VmPool", "prestart_now", [lab_pool])

    assert "prestart_now" not in response.content.decode()
    assert not Job.objects.filter(vm__pool=lab_pool).exists()


def test_prestart_now_starts_what_the_pool_misses(superuser_console, lab_pool):
    response = run_action(superuser_console, "pools.VmPool", "prestart_now", [lab_pool])

    # 3 wanted, 1 up and 1 starting: one of the stopped unassigned VMs is started.
    assert Job.objects.filter(vm__pool=lab_pool, kind=JobKind.START).count() == 1
    assert ("info", "Queued 1 start job(s).") in shown_messages(response)


# --- jobs ---------------------------------------------------------------------------------


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


# --- events and alerts ------------------------------------------------------------------


def test_the_event_list_filters_alerts_of_the_last_day(superuser_console):
    recent = alert("vm", 1, "VM web-1 stopped outside Corral")
    old = alert("vm", 2, "VM web-2 stopped outside Corral")
    Event.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    emit("changed", "vm", 3, "VM web-3 is Up")

    response = superuser_console.get(
        admin_url("project.Event", "changelist"), {"kind__exact": "alert", "age": "24h"}
    )

    assert [event.pk for event in response.context["cl"].result_list] == [recent.pk]


def test_the_event_list_filters_by_object_type(superuser_console):
    alert("vm", 1, "VM web-1 stopped outside Corral")
    host_alert = alert("host", 1, "Host kvm-1 is not responding")

    response = superuser_console.get(
        admin_url("project.Event", "changelist"), {"object_type": "host"}
    )

    assert [event.pk for event in response.context["cl"].result_list] == [host_alert.pk]


def test_a_cluster_admin_sees_only_the_alerts_of_their_cluster(console_of_a, cluster_a, cluster_b):
    alert("host", 1, "Host kvm-a is not responding", cluster_id=cluster_a.pk)
    alert("host", 2, "Host kvm-b is not responding", cluster_id=cluster_b.pk)

    response = console_of_a.get(admin_url("project.Event", "changelist"))

    assert [event.message for event in response.context["cl"].result_list] == [
        "Host kvm-a is not responding"
    ]


def test_events_are_read_only(superuser_console):
    event = alert("vm", 1, "VM web-1 stopped outside Corral")

    response = superuser_console.post(
        admin_url("project.Event", "change", event.pk), {"message": "edited"}
    )

    assert response.status_code == 403
    event.refresh_from_db()
    assert event.message == "VM web-1 stopped outside Corral"


def test_django_q_schedules_show_in_the_console_with_the_ticker(superuser_console):
    index = superuser_console.get(reverse("admin:index"))
    schedules = admin_url("django_q.Schedule", "changelist")

    assert schedules in index.content.decode()
    response = superuser_console.get(schedules)
    assert response.status_code == 200
    assert "corral-ticker" in {schedule.name for schedule in response.context["cl"].result_list}


def test_a_pool_page_links_to_the_grant_form_filled_in_for_that_pool(make_pool, make_user):
    from django.test import Client

    pool = make_pool()
    root = make_user(superuser=True)
    client = Client()
    client.force_login(root)

    page = client.get(f"/admin/pools/vmpool/{pool.pk}/change/").content.decode()
    link = page.split('id="grant-access"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
    form = client.get(link.replace("&amp;", "&")).content.decode()

    assert link.startswith("/admin/project/usergrant/add/?")
    assert '<option value="pool" selected>pool</option>' in form
    assert f'name="object_id" value="{pool.pk}"' in form
