"""The admin's charts over the last day, week or month: a host's, a cluster's and a VM's pages
and the dashboard draw the span their query asks for under a picker marking it; their
fragments answer 400 for a span they do not know, 404 for what the admin may not see, in a
bounded number of queries."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from hosts import samples
from tests.hosts.spans_data import NOW, a_month_of
from tests.project.admin.fixtures import admin_url

pytestmark = pytest.mark.django_db

HOST_FIGURES = {"cpu_percent": 40.0, "memory_given_mb": 2048, "memory_used_mb": 1024}
CLUSTER_FIGURES = {
    "cpu_percent": 30.0,
    "memory_given_mb": 1024,
    "memory_capacity_mb": 4096,
    "vms_paused": 0,
    "vms_down": 2,
    "vms_changing": 0,
    "vms_unknown": 0,
    "pool_vms_free": 2,
    "pool_vms_taken": 1,
}


@pytest.fixture(autouse=True)
def at_now(time_machine):
    """The time stands at ``NOW`` (before anyone logs in: a session would have expired)."""
    time_machine.move_to(NOW, tick=False)


@pytest.fixture
def month(make_host, make_vm, cluster_a, cluster_b):
    """A host, a VM of cluster A, and clusters A and B, each with a month of points."""
    host = make_host(cluster_a, name="kvm-1", status="up", cpus=8, memory_mb=4096)
    a_month_of(
        samples.HOSTS_KEPT,
        {**HOST_FIGURES, "vms_running": 2},
        {**HOST_FIGURES, "vms_running": 3},
        host=host,
    )
    vm = make_vm(cluster_a, name="web-1", memory_mb=1024)
    a_month_of(samples.VMS_KEPT, {"cpu_percent": 20.0}, {"cpu_percent": 60.0}, vm=vm)
    for cluster, up in ((cluster_a, 4), (cluster_b, 10)):
        a_month_of(
            samples.CLUSTERS_KEPT,
            {**CLUSTER_FIGURES, "vms_up": up},
            {**CLUSTER_FIGURES, "vms_up": up + 1},
            cluster=cluster,
        )
    return {"host": host, "vm": vm, "cluster": cluster_a, "other cluster": cluster_b}


def picked(html: str) -> str:
    return re.search(r'<a href="\?span=\w+"[^>]*aria-current="true">([^<]*)</a>', html)[1]


@pytest.mark.parametrize(
    ("label", "kind", "title"),
    [
        ("hosts.Host", "host", "Host CPU in use"),
        ("hosts.Cluster", "cluster", "VMs by state"),
        ("hosts.VirtualMachine", "vm", "VM CPU in use (of its vCPUs)"),
    ],
)
def test_an_objects_page_draws_the_span_its_query_asks_for(
    superuser_console, month, label, kind, title
):
    url = admin_url(label, "change", month[kind].pk)

    week = superuser_console.get(f"{url}?span=week").content.decode()
    unknown = superuser_console.get(f"{url}?span=year").content.decode()

    assert picked(week) == "Last week"
    assert f"{title}, last 7 days</title>" in week
    fragment = reverse(f"admin:{label.replace('.', '_').lower()}_day_charts", args=[month[kind].pk])
    assert f'data-refresh-url="{fragment}?span=week"' in week
    assert picked(unknown) == "Last day"
    assert f"{title}, last 24 hours</title>" in unknown


def test_the_dashboard_draws_the_month_of_the_clusters_the_admin_may_see(
    console_of_a, superuser_console, month
):
    mine = console_of_a.get(f"{reverse('admin:index')}?span=month").content.decode()
    everything = superuser_console.get(f"{reverse('admin:index')}?span=month").content.decode()

    assert picked(mine) == "Last month"
    assert "VMs by state, last 30 days</title>" in mine
    assert "Up: now 5, average 4, highest 5" in mine  # cluster B's are not theirs to see
    assert "Up: now 16, average 14, highest 16" in everything
    refresh = reverse("admin:hosts_cluster_all_day_charts")
    assert f'data-refresh-url="{refresh}?span=month"' in mine
    fragment = console_of_a.get(f"{refresh}?span=week").content.decode()
    assert "VMs by state, last 7 days</title>" in fragment
    assert "Up: now 5, average 4, highest 5" in fragment


@pytest.mark.parametrize("kind", ["host", "cluster", "vm", "dashboard"])
def test_a_fragment_refuses_an_unknown_span_in_plain_words(superuser_console, month, kind):
    url = _fragment(kind, month)

    response = superuser_console.get(f"{url}?span=fortnight")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert "Unknown span" in response.content.decode()


@pytest.mark.parametrize("span", ["week", "month", "fortnight"])
def test_an_admin_of_another_cluster_gets_a_404_whatever_the_span(
    console_of_a, month, make_host, make_vm, span
):
    other = month["other cluster"]
    for url in (
        reverse("admin:hosts_host_day_charts", args=[make_host(other, name="kvm-b").pk]),
        reverse("admin:hosts_cluster_day_charts", args=[other.pk]),
        reverse("admin:hosts_virtualmachine_day_charts", args=[make_vm(other, name="b-1").pk]),
    ):
        assert console_of_a.get(f"{url}?span={span}").status_code == 404


@pytest.mark.parametrize("kind", ["host", "cluster", "vm", "dashboard"])
def test_a_month_of_charts_takes_a_bounded_number_of_queries(
    superuser_console, month, kind, django_assert_max_num_queries
):
    url = f"{_fragment(kind, month)}?span=month"
    superuser_console.get(url)  # warm: the session, the user

    # the session, the user, the object (none for the dashboard), its hours, its minutes
    with django_assert_max_num_queries(5):
        response = superuser_console.get(url)

    assert response.status_code == 200
    assert "last 30 days" in response.content.decode()


def _fragment(kind: str, month: dict) -> str:
    if kind == "dashboard":
        return reverse("admin:hosts_cluster_all_day_charts")
    model = {"host": "host", "cluster": "cluster", "vm": "virtualmachine"}[kind]
    return reverse(f"admin:hosts_{model}_day_charts", args=[month[kind].pk])
