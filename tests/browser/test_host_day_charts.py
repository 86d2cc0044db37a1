"""A host's admin page keeps its day charts current: a minute after it opened, the page
shows the points the sync wrote meanwhile, without a reload."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts import samples
from hosts.models import HostSample
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
