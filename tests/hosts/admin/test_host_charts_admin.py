"""A host's last day on its admin page: CPU, memory given and used, and VMs running, drawn
as images with a text alternative, and read again by the page every minute."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts import samples
from hosts.models import HostSample
from tests.project.admin.fixtures import admin_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def sampled_host(make_host, cluster_a):
    """A host of 4096 MiB with a point a minute for the last day: CPU 40% but 90% at the
    latest minute, 2048 MiB given, 1024 used, 3 VMs running."""
    host = make_host(cluster_a, name="kvm-1", status="up", cpus=8, memory_mb=4096)
    now = samples.minute_of(timezone.now())
    HostSample.objects.bulk_create(
        HostSample(
            host=host,
            at=now - timedelta(minutes=m),
            cpu_percent=90.0 if m == 0 else 40.0,
            memory_given_mb=2048,
            memory_used_mb=1024,
            vms_running=3,
        )
        for m in range(24 * 60)
    )
    return host


def charts_url(host) -> str:
    return reverse("admin:hosts_host_day_charts", args=[host.pk])


def test_the_host_page_draws_cpu_memory_and_vms_running_as_described_images(
    superuser_console, sampled_host
):
    html = superuser_console.get(admin_url("hosts.Host", "change", sampled_host.pk)).content
    html = html.decode()

    assert len(re.findall(r'<svg role="img"', html)) == 3
    assert '<title id="cpu-title">Host CPU in use, last 24 hours</title>' in html
    assert re.search(r"CPU: now 90%, average 40%, highest 90% at \d\d:\d\d\.", html)
    assert "Given to VMs: now 2,048 MiB" in html
    assert "VMs running: now 3, average 3, highest 3" in html
    assert 'src="/static/corral/day_charts.js"' in html


def test_the_text_alternative_lists_the_day_hour_by_hour(superuser_console, sampled_host):
    html = superuser_console.get(charts_url(sampled_host)).content.decode()

    table = html[html.index('<div class="visually-hidden">') :]
    assert len(re.findall(r'<th scope="row">\d\d:\d\d</th>', table)) in (24, 25)
    assert "<td>2048</td><td>1024</td><td>3</td>" in table


def test_a_host_without_figures_says_so(superuser_console, make_host, cluster_a):
    host = make_host(cluster_a, name="new-1")

    html = superuser_console.get(charts_url(host)).content.decode()

    assert "No figures were recorded in the last 24 hours." in html


def test_the_days_charts_take_a_bounded_number_of_queries(
    superuser_console, sampled_host, django_assert_max_num_queries
):
    superuser_console.get(
        charts_url(sampled_host)
    )  # warm: the session, the user, the host, its points

    with django_assert_max_num_queries(4):
        response = superuser_console.get(charts_url(sampled_host))

    assert response.status_code == 200


def test_an_admin_of_another_cluster_gets_no_charts_of_the_host(console_of_a, make_host, cluster_b):
    other = make_host(cluster_b, name="kvm-b")

    assert console_of_a.get(charts_url(other)).status_code == 404
