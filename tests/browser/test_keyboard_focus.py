"""The keyboard focus survives live refreshes: a control re-rendered by one keeps the focus; after
a failed log-in it waits in the password field."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator, Page, expect

from hosts.models import VmStatus
from tests.browser.conftest import log_in

pytestmark = pytest.mark.slow

# Resolves once the part matched by the selector has been re-rendered by its next live refresh.
NEXT_REFRESH = """
(selector) => new Promise((resolve) => {
  const part = document.querySelector(selector);
  part.addEventListener("htmx:afterSettle", () => resolve(true), { once: true });
})
"""


def tab_to(page: Page, control: Locator) -> None:
    """Press Tab until ``control`` has the focus, as a keyboard user would."""
    for _ in range(40):
        page.keyboard.press("Tab")
        if control.evaluate("(el) => el === document.activeElement"):
            return
    raise AssertionError("Tab never reached the control")


def test_a_vm_action_button_keeps_the_keyboard_focus_when_the_vm_panel_refreshes(
    page, make_vm, make_user, grant
):
    vm = make_vm(status=VmStatus.UP)
    user = make_user()
    grant(user, "UserVmManager", vm)
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")
    operation = page.locator("#vm-panel .actions button").first.get_attribute("data-operation")
    button = page.locator(f'#vm-panel .actions button[data-operation="{operation}"]')
    tab_to(page, button)

    assert page.evaluate(NEXT_REFRESH, "#vm-panel") is True

    expect(button).to_be_focused(timeout=100)


def test_the_focused_button_of_a_row_of_my_vms_keeps_the_focus_when_the_rows_refresh(
    page, make_vm, make_user, grant
):
    user = make_user()
    first, second = make_vm(status=VmStatus.UP), make_vm(status=VmStatus.UP)
    for vm in (first, second):
        grant(user, "UserVmManager", vm)
    log_in(page, user)
    page.goto("/vms/")
    row = page.locator(f'tr[data-vm="{second.name}"]')
    operation = row.locator(".actions button").first.get_attribute("data-operation")
    button = row.locator(f'.actions button[data-operation="{operation}"]')
    tab_to(page, button)

    assert page.evaluate(NEXT_REFRESH, "tbody[hx-get]") is True

    expect(button).to_be_focused(timeout=100)


@pytest.mark.parametrize("login_page", ["/login/", "/admin/login/"], ids=["portal", "admin"])
def test_after_a_wrong_password_the_cursor_waits_in_the_password_field(page, make_user, login_page):
    user = make_user(is_staff=True)
    page.goto(login_page)
    expect(page.get_by_label("Username")).to_be_focused()
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill("not-the-password")

    page.get_by_label("Password").press("Enter")

    expect(page.get_by_text("correct username and password")).to_be_visible()
    expect(page.get_by_label("Username")).to_have_value(user.username)
    expect(page.get_by_label("Password")).to_be_focused()
