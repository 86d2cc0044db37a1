"""The capacity timeline of a cluster: what accepted leases reserve and what is free for new
ones over the coming days, drawn as an inline SVG, for whoever may see the cluster."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from tests.leases.fixtures import DAY, at, instances, whole_hosts
from tests.project.admin.fixtures import admin_url, logged_in

pytestmark = pytest.mark.django_db


def timeline_url(cluster) -> str:
    return reverse("admin:leases_capacity_timeline", args=[cluster.pk])


def steps_of(response) -> list[tuple]:
    return [
        (
            step.start,
            step.end,
            step.reserved_vcpus,
            step.free_vcpus,
            step.reserved_memory_mb,
            step.free_memory_mb,
        )
        for step in response.context["timeline"].steps
    ]


@pytest.fixture
def two_leases(reservable_hosts, make_lease, cluster_a, cluster_b):
    """Two reservable hosts in cluster A (64 vCPUs and 3072 MiB each for leases): two
    instances from 10:00 to 14:00, a whole host from 12:00 to 16:00; and a lease in B."""
    reservable_hosts(2, cluster=cluster_a)
    make_lease(at(10), at(14), instances(2, vcpus=1, memory_mb=1024))
    make_lease(at(12), at(16), whole_hosts(1))
    reservable_hosts(1, cluster=cluster_b)
    make_lease(at(0), at(20), instances(3, vcpus=4, memory_mb=1024))


def test_the_timeline_shows_reserved_and_free_capacity_step_by_step(
    superuser_console, two_leases, cluster_a
):
    response = superuser_console.get(
        timeline_url(cluster_a), {"start": DAY.date().isoformat(), "days": "2"}
    )

    assert response.status_code == 200
    end = DAY + timedelta(days=2)
    assert steps_of(response) == [
        (DAY, at(10), 0, 128, 0, 6144),
        (at(10), at(12), 2, 126, 2048, 4096),
        (at(12), at(14), 66, 62, 5120, 1024),
        (at(14), at(16), 64, 64, 3072, 3072),
        (at(16), end, 0, 128, 0, 6144),
    ]


def test_the_timeline_is_an_inline_svg_with_a_bar_per_step(
    superuser_console, two_leases, cluster_a
):
    response = superuser_console.get(
        timeline_url(cluster_a), {"start": DAY.date().isoformat(), "days": "2"}
    )

    html = response.content.decode()
    for resource in ("vcpus", "memory"):
        assert f'<svg class="capacity-chart" id="chart-{resource}"' in html
    assert html.count('<g class="step"') == 2 * 5
    assert 'data-reserved="66" data-free="62"' in html
    assert "<script" not in html.split('id="content-main"')[1]  # no JS library


def test_the_timeline_shows_the_next_14_days_by_default(superuser_console, cluster_a):
    response = superuser_console.get(timeline_url(cluster_a))

    timeline = response.context["timeline"]
    assert timeline.end - timeline.start == timedelta(days=14)
    assert "No host of this cluster is reservable" in response.content.decode()


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"days": "<b>x</b>"}, "days", "Enter a whole number."),
        ({"days": "0"}, "days", "Ensure this value is greater than or equal to 1."),
        ({"days": "365"}, "days", "Ensure this value is less than or equal to 90."),
        ({"start": "<b>soon</b>"}, "start", "Enter a valid date."),
    ],
)
def test_bad_input_is_reported_next_to_its_field_and_nothing_is_drawn(
    superuser_console, cluster_a, query, field, message
):
    response = superuser_console.get(timeline_url(cluster_a), query)

    assert response.status_code == 200
    assert response.context["form"].errors[field] == [message]
    assert response.context["timeline"] is None
    html = response.content.decode()
    row = html.split(f'data-field="{field}"')[1].split("data-field=")[0]
    assert message in row
    assert "<b>" not in html.split('id="content-main"')[1]


def test_a_cluster_admin_sees_the_timeline_of_their_cluster(console_of_a, two_leases, cluster_a):
    response = console_of_a.get(
        timeline_url(cluster_a), {"start": DAY.date().isoformat(), "days": "2"}
    )

    assert response.status_code == 200
    assert len(steps_of(response)) == 5


def test_a_cluster_the_user_may_not_see_is_not_found(console_of_a, cluster_b):
    assert console_of_a.get(timeline_url(cluster_b)).status_code == 404


def test_a_cluster_that_does_not_exist_is_not_found(superuser_console):
    response = superuser_console.get(reverse("admin:leases_capacity_timeline", args=[999999]))

    assert response.status_code == 404


def test_a_user_without_staff_access_is_sent_to_login(make_user, grant, cluster_a):
    user = make_user()
    grant(user, "ClusterAdmin", cluster_a)

    response = logged_in(user).get(timeline_url(cluster_a))

    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]


def test_the_cluster_page_and_list_link_to_the_timeline(console_of_a, cluster_a):
    page = console_of_a.get(admin_url("hosts.Cluster", "change", cluster_a.pk))
    listing = console_of_a.get(admin_url("hosts.Cluster", "changelist"))

    assert timeline_url(cluster_a) in page.content.decode()
    assert timeline_url(cluster_a) in listing.content.decode()


def test_the_lease_list_links_to_the_timelines_of_clusters_with_reservable_hosts(
    superuser_console, reservable_hosts, cluster_a, cluster_b
):
    reservable_hosts(1, cluster=cluster_a)

    html = superuser_console.get(admin_url("leases.Lease", "changelist")).content.decode()

    assert timeline_url(cluster_a) in html
    assert timeline_url(cluster_b) not in html
