"""The dashboard on the admin index: hosts and VMs by status, pools below their prestarted
level, recent alerts, running and failed jobs — each linking to the list it counts, scoped to
what the admin may see, and refreshed in place every few seconds."""

from __future__ import annotations

import html as html_lib
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobKind
from project.events import alert
from project.models import Event
from tests.pools.fixtures import add_pool_vms
from tests.project.admin.fixtures import logged_in

pytestmark = pytest.mark.django_db
FIGURE = re.compile(
    r'<div data-(?:status|figure)="([\w-]+)"[^>]*><dt>[^<]*</dt><dd><a href="([^"]+)">(\d+)</a>'
)


def figures(page: str, list_id: str) -> dict[str, tuple[int, str]]:
    """{key: (count, link)} of the figures in the dashboard list ``list_id``."""
    section = page.split(f'id="{list_id}"', 1)[1].split("</dl>", 1)[0]
    return {
        key: (int(count), html_lib.unescape(url)) for key, url, count in FIGURE.findall(section)
    }


def counts(page: str, list_id: str) -> dict[str, int]:
    return {key: count for key, (count, _) in figures(page, list_id).items() if count}


def listed(console, link: str) -> int:
    """How many rows the changelist behind a dashboard link shows."""
    response = console.get(link)
    assert response.status_code == 200, link
    return response.context["cl"].result_count


@pytest.fixture
def two_clusters(make_host, make_vm, make_pool, cluster_a, cluster_b, admin_user):
    """Hosts, VMs, a short pool, alerts and jobs in cluster A and in cluster B."""
    for name, status in [("a-1", "up"), ("a-2", "up"), ("a-3", "maintenance")]:
        make_host(cluster_a, name=name, status=status)
    make_host(cluster_b, name="b-1", status="non_responsive")
    for name, status in [("vm-a1", "up"), ("vm-a2", "down")]:
        make_vm(cluster_a, name=name, status=status)
    for name in ("vm-b1", "vm-b2", "vm-b3"):
        make_vm(cluster_b, name=name, status="up")
    short_a = make_pool(cluster_a, name="lab-a", size=3, prestarted_vms=3)
    add_pool_vms(short_a, ["up", "down", "down"])
    short_b = make_pool(cluster_b, name="lab-b", size=2, prestarted_vms=2)
    add_pool_vms(short_b, ["down", "down"])
    alert("host", 1, "Host a-3 <b>overheats</b>", cluster_id=cluster_a.pk)
    alert("host", 2, "Host b-1 is not responding", cluster_id=cluster_b.pk)
    old = alert("host", 3, "Host a-1 was slow", cluster_id=cluster_a.pk)
    Event.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=30))
    vm_a = make_vm(cluster_a, name="vm-a3")
    vm_b = make_vm(cluster_b, name="vm-b4")
    running = jobs.submit(JobKind.NOOP, vm=vm_a, requested_by=admin_user)
    failed = jobs.submit(JobKind.NOOP, vm=vm_b, requested_by=admin_user)
    failed_long_ago = jobs.submit(JobKind.NOOP, vm=vm_b, requested_by=admin_user, coalesce=False)
    now = timezone.now()
    Job.objects.filter(pk=running.pk).update(state="running")
    Job.objects.filter(pk=failed.pk).update(state="failed", finished_at=now)
    Job.objects.filter(pk=failed_long_ago.pk).update(
        state="failed", finished_at=now - timedelta(hours=2)
    )


def test_a_superuser_sees_every_figure_with_the_app_list_below(superuser_console, two_clusters):
    page = superuser_console.get(reverse("admin:index")).content.decode()

    assert counts(page, "hosts-by-status") == {"up": 2, "maintenance": 1, "non_responsive": 1}
    assert counts(page, "vms-by-status") == {"up": 5, "down": 7}  # pool VMs included
    assert counts(page, "alerts") == {"last-24h": 2}
    assert counts(page, "jobs") == {"running": 1, "failed-last-hour": 1}
    assert 'data-pool="lab-a"' in page and 'data-pool="lab-b"' in page
    assert 'data-prestarted="1" data-wanted="3">1 of 3<' in page
    assert 'id="content-main"' in page and reverse("admin:hosts_host_changelist") in page


def test_every_status_is_shown_even_at_zero(superuser_console, two_clusters):
    page = superuser_console.get(reverse("admin:index")).content.decode()

    assert set(figures(page, "hosts-by-status")) == {
        "connecting",
        "up",
        "maintenance",
        "non_responsive",
        "error",
    }
    assert '<div data-status="error" class="zero"><dt>Error</dt><dd>' in page


@pytest.mark.parametrize("viewer", ["superuser", "admin of A"])
def test_each_figure_links_to_the_list_of_exactly_what_it_counts(
    two_clusters, admin_user, admin_of_a, viewer
):
    console = logged_in(admin_user if viewer == "superuser" else admin_of_a)
    page = console.get(reverse("admin:index")).content.decode()

    for list_id in ("hosts-by-status", "vms-by-status", "alerts", "jobs", "pools-below-prestarted"):
        for key, (count, link) in figures(page, list_id).items():
            assert listed(console, link) == count, (list_id, key, link)


def test_a_cluster_admin_sees_only_their_clusters_figures(console_of_a, two_clusters):
    page = console_of_a.get(reverse("admin:index")).content.decode()

    assert counts(page, "hosts-by-status") == {"up": 2, "maintenance": 1}
    assert counts(page, "vms-by-status") == {"up": 2, "down": 4}
    assert counts(page, "alerts") == {"last-24h": 1}
    assert counts(page, "jobs") == {"running": 1}
    assert counts(page, "pools-below-prestarted") == {"count": 1}
    for other in ("lab-b", "b-1 is not responding", "cluster-b"):
        assert other not in page


def test_alert_messages_are_shown_escaped(superuser_console, two_clusters):
    page = superuser_console.get(reverse("admin:index")).content.decode()

    latest = page.split('id="latest-alerts"', 1)[1].split("</ul>", 1)[0]
    assert "Host a-3 &lt;b&gt;overheats&lt;/b&gt;" in latest
    assert "<b>overheats" not in page


def test_alerts_say_how_long_ago_they_came_and_just_now_within_the_minute(
    superuser_console, cluster_a
):
    fresh = alert("host", 1, "Host a-1 is back", cluster_id=cluster_a.pk)
    older = alert("host", 2, "Host a-2 was slow", cluster_id=cluster_a.pk)
    Event.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(minutes=5))

    page = superuser_console.get(reverse("admin:index")).content.decode()

    said = dict(
        re.findall(r'<li data-event="(\d+)">.*?<span class="mini quiet">(.*?)</span>', page)
    )
    assert said == {str(fresh.pk): "just now", str(older.pk): "5\xa0minutes ago"}


def test_the_index_follows_the_event_feed_and_refetches_the_dashboard_fragment(
    superuser_console,
):
    page = superuser_console.get(reverse("admin:index")).content.decode()

    fragment, stream = reverse("admin:dashboard"), reverse("portal:event-stream")
    assert (
        f'<div id="corral-dashboard" data-refresh-url="{fragment}" data-event-stream="{stream}">'
        in page
    )
    assert superuser_console.get(fragment).status_code == 200


def test_the_fragment_is_the_dashboard_alone_with_current_figures(
    superuser_console, two_clusters, make_host, cluster_a
):
    make_host(cluster_a, name="a-4", status="up")

    response = superuser_console.get(reverse("admin:dashboard"))

    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and "<script" not in body
    assert counts(body, "hosts-by-status")["up"] == 3


def test_the_fragment_is_scoped_like_the_page(console_of_a, two_clusters):
    body = console_of_a.get(reverse("admin:dashboard")).content.decode()

    assert counts(body, "vms-by-status") == {"up": 2, "down": 4}
    assert "lab-b" not in body


def test_the_fragment_sends_users_without_staff_access_to_login(make_user):
    response = logged_in(make_user()).get(reverse("admin:dashboard"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_a_staff_user_without_grants_sees_no_figures(make_user, two_clusters):
    page = logged_in(make_user(is_staff=True)).get(reverse("admin:index")).content.decode()

    for list_id in ("hosts-by-status", "vms-by-status", "pools-below-prestarted", "jobs"):
        assert f'id="{list_id}"' not in page
    assert counts(page, "alerts") == {}  # the event feed is open to staff, but shows nothing
