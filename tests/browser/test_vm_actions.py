"""The VM page offers what the VM's state allows (hosts.services.ALLOWED_FROM), live: nothing
while it starts, then what an Up VM can do (without a reload), then what a paused one can."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import VmStatus
from tests.browser.conftest import VM_START_MS, log_in, wait_until_ready

pytestmark = pytest.mark.slow

POWER_OPERATIONS = ("start", "shutdown", "poweroff", "suspend", "resume")


def expect_offered(page, offered: set[str], timeout: float | None = None) -> None:
    for operation in POWER_OPERATIONS:
        button = page.locator(f'#vm-panel button[data-operation="{operation}"]')
        expect(button).to_have_count(1 if operation in offered else 0, timeout=timeout)


def test_a_vm_offers_only_what_its_state_allows_and_follows_it_live(
    page, sim_pool, pool_user, running_tasks, tmp_path
):
    pool = sim_pool(size=1, prestarted_vms=0)
    user = pool_user(pool)
    go_on = tmp_path / "go-on"
    wait_until_ready(pool, running_tasks(starts_wait_for=go_on))
    log_in(page, user)
    page.locator(f'section.card.pool[data-pool="{pool.name}"]').get_by_role(
        "button", name="Take a VM"
    ).click()
    expect(page.locator("#vm-starting")).to_contain_text("is starting now")
    page.evaluate("window.marker = 1")

    expect_offered(page, set())
    go_on.touch()  # the start goes on past its hook
    expect(page.locator("#vm-status")).to_have_attribute(
        "data-status", VmStatus.UP, timeout=VM_START_MS
    )
    expect_offered(page, {"shutdown", "poweroff", "suspend"})
    assert page.evaluate("window.marker") == 1, "the page was reloaded"

    page.locator('#vm-panel button[data-operation="suspend"]').click()
    expect(page.locator("#vm-status")).to_have_attribute(
        "data-status", VmStatus.PAUSED, timeout=VM_START_MS
    )
    expect_offered(page, {"start", "shutdown", "poweroff", "resume"})

    page.locator('#vm-panel button[data-operation="resume"]').click()
    expect(page.locator("#vm-status")).to_have_attribute(
        "data-status", VmStatus.UP, timeout=VM_START_MS
    )
    expect_offered(page, {"shutdown", "poweroff", "suspend"})
