"""A cluster's last day on its admin page, and every cluster an admin may see on the dashboard:
its hosts' CPU and memory given, its VMs by state and its pools' VMs free and taken, drawn as
images with a text alternative and read again by the page every minute."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts import samples
from hosts.models import ClusterSample
from tests.project.admin.fixtures import admin_url

pytestmark = pytest.mark.django_db


def sample_day(cluster, vms_up: int, free: int) -> None:
    """A point a minute for the last day: CPU 30%, 1024 of 4096 MiB given, ``vms_up`` VMs up
    and 2 down (1 starting at the latest minute), ``free`` pool VMs free and 1 taken."""
    now = samples.minute_of(timezone.now())
    ClusterSample.objects.bulk_create(
        ClusterSample(
            cluster=cluster,
            at=now - timedelta(minutes=m),
            cpu_percent=30.0,
            memory_given_mb=1024,
            memory_capacity_mb=4096,
            vms_up=vms_up,
            vms_paused=0,
            vms_down=2,
            vms_changing=1 if m == 0 else 0,
            vms_unknown=0,
            pool_vms_free=free,
            pool_vms_taken=1,
        )
        for m in range(24 * 60)
    )


def test_the_cluster_page_draws_its_load_its_vms_by_state_and_its_pools(
    superuser_console, cluster_a
):
    sample_day(cluster_a, vms_up=4, free=2)

    html = superuser_console.get(admin_url("hosts.Cluster", "change", cluster_a.pk)).content
    html = html.decode()

    assert len(re.findall(r'<svg role="img"', html)) == 3
    assert "CPU in use: now 30%, average 30%" in html
    assert "Memory given to VMs: now 25%, average 25%" in html
    assert "Up: now 4, average 4, highest 4" in html
    assert re.search(r"Changing state: now 1, average 0, highest 1 at \d\d:\d\d\.", html)
    assert "Free (running, nobody holds it): now 2" in html
    assert "Taken: now 1" in html
    assert 'src="/static/corral/day_charts.js"' in html
    table = html[html.index('<div class="visually-hidden">') :]
    assert "This cluster: figures hour by hour" in table
    assert len(re.findall(r'<th scope="row">\d\d:\d\d</th>', table)) in (24, 25)
    assert "<td>30%</td><td>25%</td><td>4</td><td>0</td><td>2</td>" in table


def test_the_dashboard_adds_up_the_clusters_the_admin_may_see(
    console_of_a, cluster_a, cluster_b, superuser_console
):
    sample_day(cluster_a, vms_up=4, free=2)
    sample_day(cluster_b, vms_up=10, free=5)

    mine = console_of_a.get(reverse("admin:index")).content.decode()
    everything = superuser_console.get(reverse("admin:index")).content.decode()

    assert "Up: now 4, average 4" in mine  # cluster B's VMs are not theirs to see
    assert "Up: now 14, average 14" in everything
    assert "Free (running, nobody holds it): now 7" in everything
    assert 'id="dashboard-day-charts"' in mine
    refreshed = console_of_a.get(reverse("admin:hosts_cluster_all_day_charts")).content.decode()
    assert "Up: now 4, average 4" in refreshed


def test_the_dashboards_live_refresh_does_not_draw_the_charts_again(superuser_console, cluster_a):
    sample_day(cluster_a, vms_up=4, free=2)

    fragment = superuser_console.get(reverse("admin:dashboard")).content.decode()

    assert "<svg" not in fragment  # they read themselves again each minute instead


def test_a_cluster_without_figures_says_so(superuser_console, cluster_a):
    url = reverse("admin:hosts_cluster_day_charts", args=[cluster_a.pk])

    assert "No figures were recorded in the last 24 hours." in superuser_console.get(url).text


def test_the_clusters_charts_take_a_bounded_number_of_queries(
    superuser_console, cluster_a, django_assert_max_num_queries
):
    sample_day(cluster_a, vms_up=4, free=2)
    url = reverse("admin:hosts_cluster_day_charts", args=[cluster_a.pk])
    superuser_console.get(url)  # warm: the session, the user

    with django_assert_max_num_queries(4):
        response = superuser_console.get(url)

    assert response.status_code == 200


def test_an_admin_of_another_cluster_gets_no_charts_of_it(console_of_a, cluster_b):
    url = reverse("admin:hosts_cluster_day_charts", args=[cluster_b.pk])

    assert console_of_a.get(url).status_code == 404
