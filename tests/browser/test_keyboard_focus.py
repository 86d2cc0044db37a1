"""The keyboard focus survives live refreshes: a control re-rendered by one keeps the focus."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import VmStatus
from tests.browser.conftest import log_in

pytestmark = pytest.mark.slow

# Resolves once the VM panel has been re-rendered by its next live refresh.
NEXT_PANEL_REFRESH = """
() => new Promise((resolve) => {
  const panel = document.getElementById("vm-panel");
  panel.addEventListener("htmx:afterSettle", () => resolve(true), { once: true });
})
"""


def test_a_vm_action_button_keeps_the_keyboard_focus_when_the_vm_panel_refreshes(
    page, make_vm, make_user, grant
):
    vm = make_vm(status=VmStatus.UP)
    user = make_user()
    grant(user, "UserVmManager", vm)
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")
    first_action = page.locator("#vm-panel .actions button").first
    operation = first_action.get_attribute("data-operation")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.operation") == operation:
            break
    expect(first_action).to_be_focused()

    assert page.evaluate(NEXT_PANEL_REFRESH) is True

    focused = page.locator(f'#vm-panel .actions button[data-operation="{operation}"]')
    expect(focused).to_be_focused(timeout=100)
