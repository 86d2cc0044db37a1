"""Live pages in a real browser: what a page shows after its live updates is what a reload of
it shows, and a live update keeps what the user is typing."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from leases import lifecycle
from tests.browser.conftest import log_in
from tests.leases.fixtures import at, instances

pytestmark = pytest.mark.slow


def _sections(page) -> list[str]:
    """The headings of the live part of a lease's page, in order."""
    return page.locator("#lease-panel h2").all_inner_texts()


def test_a_lease_page_that_turns_active_offers_launch_a_vm_without_a_reload(
    page, reservable_hosts, lease_user, make_lease, make_template
):
    reservable_hosts(1)
    make_template(name="small", cluster=None, vcpus=1, memory_mb=1024, disk_gb=10)
    user = lease_user()
    lease = make_lease(at(9), at(17), instances(1), owner=user, name="lab")
    log_in(page, user)
    page.goto(f"/leases/{lease.pk}/")
    expect(page.locator("#lease-status")).to_have_text("Pending")
    expect(page.get_by_role("heading", name="Launch a VM")).to_have_count(0)
    page.evaluate("window.marker = 1")

    lifecycle.run_due_events(now=at(9))  # what the periodic task does when the start is due

    expect(page.locator("#lease-status")).to_have_text("Active")
    expect(page.get_by_role("heading", name="Launch a VM")).to_be_visible()
    expect(page.locator("#launch-form").get_by_label("VM name")).to_have_value("lab-1")
    assert page.evaluate("window.marker") == 1, "the page was reloaded"
    live = _sections(page)
    page.reload()
    expect(page.locator("#lease-status")).to_have_text("Active")
    assert _sections(page) == live


def test_a_live_refresh_of_a_lease_page_keeps_the_name_being_typed(
    page, reservable_hosts, lease_user, make_lease, make_template
):
    reservable_hosts(1)
    make_template(name="small", cluster=None, vcpus=1, memory_mb=1024, disk_gb=10)
    user = lease_user()
    lease = make_lease(at(9), at(17), instances(1), owner=user, name="lab")
    lifecycle.run_due_events(now=at(9))
    log_in(page, user)
    page.goto(f"/leases/{lease.pk}/")
    name = page.locator("#launch-form").get_by_label("VM name")
    name.fill("my-own-name")

    with page.expect_response(f"**/leases/{lease.pk}/panel/"):
        page.evaluate("document.body.dispatchEvent(new CustomEvent('corral:changed'))")

    expect(page.locator("#lease-status")).to_have_text("Active")
    expect(name).to_have_value("my-own-name")
    expect(name).to_be_focused()
