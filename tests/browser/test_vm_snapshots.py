"""A VM's snapshots in a real browser at 1280 px: its holder takes one with its memory from the
VM's page, and the list shows it being taken, then (the task cluster's job done, without a
reload) ready and current; the section passes axe-core's rules, and fits a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import VirtualMachine
from tests.browser.accessibility import PHONE, blocking_violations, sideways_scroll, too_wide
from tests.browser.conftest import VM_START_MS, log_in

pytestmark = pytest.mark.slow


def test_the_holder_takes_a_snapshot_from_the_vms_page_and_sees_it_ready(
    page, running_vm, make_user, grant, running_tasks
):
    vm = running_vm()
    user = make_user()
    grant(user, "UserRole", vm)
    VirtualMachine.objects.filter(pk=vm.pk).update(owner=user)
    running_tasks()
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")
    expect(page.locator("#no-snapshots")).to_be_visible()

    form = page.locator("#snapshot-form")
    form.get_by_label("Name").fill("before-upgrade")
    form.get_by_label("Description").fill("known good <b>state</b>")
    form.get_by_label("Save its memory too (it resumes where it was)").check()
    page.locator("#snapshot-submit").click()

    expect(page.locator("#messages")).to_contain_text(
        f"Snapshot before-upgrade of VM {vm.name} is being taken"
    )
    row = page.locator('#vm-snapshot-list tr[data-snapshot="before-upgrade"]')
    expect(row).to_contain_text("known good <b>state</b>")
    expect(row).to_have_attribute("data-status", "ready", timeout=VM_START_MS)
    expect(row).to_have_attribute("data-current", "1")
    expect(row).to_contain_text("With memory")
    expect(row.get_by_role("button", name="Revert to before-upgrade")).to_be_visible()
    expect(page.locator("#vm-jobs")).to_contain_text("Take a snapshot · Succeeded")
    assert blocking_violations(page) == []
    page.set_viewport_size(PHONE)
    assert sideways_scroll(page) == 0, too_wide(page)
    # Read at one instant (the list is redrawn live: a box read across a redraw is none).
    revert_right = row.get_by_role("button", name="Revert to before-upgrade").evaluate(
        "(button) => button.getBoundingClientRect().right"
    )
    assert revert_right <= PHONE["width"], "Revert is off the screen"
