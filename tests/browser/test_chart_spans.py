"""A VM's charts over the last day, week or month in the browser: on its portal page, on a
laptop and on a phone, picking "Last week" swaps the charts in place (no reload), marks the
choice, puts it in the address, and the minutely refresh keeps to the week; no serious
accessibility violation, no sideways scrolling."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts import samples
from tests.browser.accessibility import blocking_violations, sideways_scroll
from tests.browser.conftest import log_in
from tests.hosts.spans_data import a_month_of

pytestmark = pytest.mark.slow

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def month_vm(make_vm, make_cluster, make_user, grant):
    """A VM held by its owner, with thirty days of hourly points (CPU 20%) and the last day's
    minutes (CPU 60%)."""
    owner = make_user("vm-holder")
    vm = make_vm(make_cluster(), name="web-1", memory_mb=512, owner=owner)
    grant(owner, "UserRole", vm)
    figures = {"memory_used_mb": 256, "disk_read_bps": 50_000, "net_rx_bps": 8_000}
    a_month_of(
        samples.VMS_KEPT,
        {"cpu_percent": 20.0, **figures},
        {"cpu_percent": 60.0, **figures},
        now=samples.minute_of(timezone.now()),
        vm=vm,
    )
    return vm


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280px", "390px"])
def test_picking_last_week_swaps_the_charts_in_place_and_marks_the_choice(
    new_page, month_vm, viewport
):
    page = new_page(viewport=viewport)
    page.clock.install()
    log_in(page, month_vm.owner)
    page.goto(f"/vms/{month_vm.pk}/")
    picker = page.get_by_role("group", name="Span of the charts")
    day, week = (
        picker.get_by_role("link", name="Last day"),
        picker.get_by_role("link", name="Last week"),
    )
    expect(day).to_have_attribute("aria-current", "true")
    expect(
        page.get_by_role("img", name="VM CPU in use (of its vCPUs), last 24 hours")
    ).to_be_visible()
    page.evaluate("window.sameDocument = true")

    week.click()

    expect(
        page.get_by_role("img", name="VM CPU in use (of its vCPUs), last 7 days")
    ).to_be_visible()
    expect(page.locator("#vm-day-charts").get_by_role("img")).to_have_count(4)
    expect(week).to_have_attribute("aria-current", "true")
    expect(day).not_to_have_attribute("aria-current", re.compile(".*"))
    assert page.evaluate("window.sameDocument") is True, "the page was loaded again"
    expect(page).to_have_url(re.compile(rf"/vms/{month_vm.pk}/\?span=week$"))
    assert blocking_violations(page) == []
    assert sideways_scroll(page) == 0

    with page.expect_request(re.compile(r"/day-charts/\?span=week$")):
        page.clock.run_for(61_000)

    expect(
        page.get_by_role("img", name="VM CPU in use (of its vCPUs), last 7 days")
    ).to_be_visible()
    expect(page.locator("#cpu-desc")).to_contain_text("CPU: now 60%")
