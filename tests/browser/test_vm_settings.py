"""A VM's settings in a real browser: its manager makes it highly available from its page and
back, and the page says so; a user who may only use it sees the setting but no form."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import VirtualMachine, VmStatus
from tests.browser.conftest import log_in

pytestmark = pytest.mark.slow

ON = "On: restart it on another host once its host is confirmed down"
OFF = "Off: leave it down with its host"


def test_a_vm_manager_turns_high_availability_on_and_off_and_the_page_shows_it(
    page, make_vm, make_user, grant
):
    vm = make_vm(status=VmStatus.UP)
    manager = make_user()
    grant(manager, "UserVmManager", vm)
    log_in(page, manager)
    page.goto(f"/vms/{vm.pk}/")
    shown = page.locator("#vm-ha")
    expect(shown).to_have_attribute("data-highly-available", "0")
    expect(page.get_by_label(OFF)).to_be_checked()

    page.get_by_label(ON).check()
    page.locator("#vm-settings-submit").click()

    expect(page.locator("#messages")).to_contain_text(f"VM {vm.name} is highly available")
    expect(shown).to_have_attribute("data-highly-available", "1")
    expect(shown).to_contain_text("Highly available: restarted on another host")
    expect(page.get_by_label(ON)).to_be_checked()
    assert VirtualMachine.objects.get(pk=vm.pk).highly_available is True

    page.get_by_label(OFF).check()
    page.locator("#vm-settings-submit").click()

    expect(page.locator("#messages")).to_contain_text(f"VM {vm.name} is no longer highly available")
    expect(shown).to_have_attribute("data-highly-available", "0")
    expect(shown).to_contain_text("Not highly available")
    assert VirtualMachine.objects.get(pk=vm.pk).highly_available is False


def test_a_vm_user_who_may_not_change_it_sees_the_setting_without_a_form(
    page, make_vm, make_user, grant
):
    vm = make_vm(status=VmStatus.UP, highly_available=True)
    user = make_user()
    grant(user, "UserRole", vm)
    log_in(page, user)

    page.goto(f"/vms/{vm.pk}/")

    expect(page.locator("#vm-ha")).to_have_attribute("data-highly-available", "1")
    expect(page.locator("#vm-settings-form")).to_have_count(0)
