"""A host's and a cluster's admin pages and the dashboard keep their day charts current: a
minute after they opened, they show the points written meanwhile, without a reload."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts import samples
from hosts.models import ClusterSample, HostSample
from tests.browser.test_admin_grants import log_in_to_console

pytestmark = pytest.mark.slow


def _point(host, at, vms: int) -> HostSample:
    return HostSample.objects.create(
        host=host, at=at, cpu_percent=20, memory_given_mb=512, memory_used_mb=256, vms_running=vms
    )


def test_the_host_page_shows_a_new_minute_without_a_reload(new_page, make_user, make_host):
    host = make_host(name="kvm-live", status="up", cpus=4, memory_mb=4096)
    now = samples.minute_of(timezone.now())
    _point(host, now - timedelta(minutes=1), vms=2)
    page = new_page()
    page.clock.install()
    log_in_to_console(page, make_user("operator", superuser=True))
    page.goto(f"/admin/hosts/host/{host.pk}/change/")
    vms_chart = page.locator("#vms-desc")
    expect(vms_chart).to_contain_text("VMs running: now 2")

    _point(host, now, vms=5)
    page.clock.run_for(61_000)

    expect(vms_chart).to_contain_text("VMs running: now 5")


def _cluster_point(cluster, at, vms_up: int) -> ClusterSample:
    return ClusterSample.objects.create(
        cluster=cluster,
        at=at,
        cpu_percent=20,
        memory_given_mb=512,
        memory_capacity_mb=4096,
        vms_up=vms_up,
        vms_paused=0,
        vms_down=0,
        vms_changing=0,
        vms_unknown=0,
        pool_vms_free=1,
        pool_vms_taken=0,
    )


def test_the_cluster_page_and_the_dashboard_show_a_new_minute_without_a_reload(
    new_page, make_user, make_cluster
):
    cluster = make_cluster(name="lab-live")
    now = samples.minute_of(timezone.now())
    _cluster_point(cluster, now - timedelta(minutes=1), vms_up=2)
    page = new_page()
    page.clock.install()
    log_in_to_console(page, make_user("operator", superuser=True))
    page.goto(f"/admin/hosts/cluster/{cluster.pk}/change/")
    states = page.locator("#vms-by-state-desc")
    expect(states).to_contain_text("Up: now 2")
    dashboard = page.context.new_page()
    dashboard.clock.install()
    dashboard.goto("/admin/")
    expect(dashboard.get_by_role("img", name="VMs by state, last 24 hours")).to_be_visible()
    expect(dashboard.locator("#vms-by-state-desc")).to_contain_text("Up: now 2")

    _cluster_point(cluster, now, vms_up=7)
    page.clock.run_for(61_000)
    dashboard.clock.run_for(61_000)

    expect(states).to_contain_text("Up: now 7")
    expect(dashboard.locator("#vms-by-state-desc")).to_contain_text("Up: now 7")
