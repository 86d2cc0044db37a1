"""The buttons that lose something ask first: Return to pool, Power off, and Shut down of a VM
that then goes back to its pool open a dialog saying what is lost; Cancel (or Escape) leaves
the VM as it was, the dialog's button does it. Without JavaScript the same buttons still work,
at once."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from pools import services as pool_services
from tests.browser.conftest import PASSWORD, log_in
from tests.pools.fixtures import add_pool_vms

pytestmark = pytest.mark.slow


@pytest.fixture
def held_vm(make_pool, make_cluster, make_template, pool_user):
    """held_vm(stateless) -> (user, the pool VM that user holds, Up)."""

    def make(stateless: bool):
        pool = make_pool(
            cluster=make_cluster(), template=make_template(), size=1, stateless=stateless
        )
        add_pool_vms(pool, [VmStatus.UP])
        user = pool_user(pool)
        return user, pool_services.allocate_vm(pool, user).vm

    return make


def _dialog(page):
    return page.get_by_role("dialog")


def test_cancelling_return_to_pool_of_a_stateless_pool_keeps_the_vm_and_says_its_disk_would_be_lost(
    page, held_vm
):
    user, vm = held_vm(stateless=True)
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")

    page.get_by_role("button", name="Return to pool").click()

    dialog = _dialog(page)
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(f"Return {vm.name} to pool {vm.pool.name}?")
    expect(dialog).to_contain_text("the VM's disk is reverted")
    expect(dialog).to_contain_text("everything written to it since you took it is lost")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(page).to_have_url(re.compile(rf"/vms/{vm.pk}/$"))
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"VM {vm.name}")
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id == user.pk


def test_confirming_return_to_pool_gives_the_vm_back(page, held_vm):
    user, vm = held_vm(stateless=False)
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")

    page.get_by_role("button", name="Return to pool").click()
    dialog = _dialog(page)
    expect(dialog).to_contain_text(f"goes back to pool {vm.pool.name} as it is, for others")
    dialog.get_by_role("button", name="Return to pool").click()

    expect(page).to_have_url(re.compile(r"/vms/$"))
    expect(page.locator("#messages")).to_contain_text(f"VM {vm.name} went back to pool")
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id is None


def test_power_off_says_unsaved_work_is_lost_and_only_confirming_it_queues_the_job(page, held_vm):
    user, vm = held_vm(stateless=False)
    log_in(page, user)
    page.goto("/vms/")
    power_off = page.locator(f'#my-vms tr[data-vm="{vm.name}"] button[data-operation="poweroff"]')

    power_off.click()
    dialog = _dialog(page)
    expect(dialog).to_contain_text(f"Power off {vm.name}?")
    expect(dialog).to_contain_text("like pulling the plug")
    expect(dialog).to_contain_text("any work it has not saved is lost")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert not Job.objects.filter(vm=vm, kind=JobKind.POWEROFF).exists()

    power_off.click()
    dialog.get_by_role("button", name="Power off").click()

    expect(page.locator("#messages")).to_contain_text(f"Power off of {vm.name} queued")
    assert Job.objects.filter(vm=vm, kind=JobKind.POWEROFF).count() == 1


def test_shut_down_of_a_stateless_pools_vm_asks_first_as_return_to_pool_does(page, held_vm):
    """Stopped, the VM goes back to its pool and its disk is reverted: like Return to pool."""
    user, vm = held_vm(stateless=True)
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")
    shut_down = page.locator('#vm-panel button[data-operation="shutdown"]')

    shut_down.click()
    dialog = _dialog(page)
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(f"Shut down {vm.name}?")
    expect(dialog).to_contain_text(f"goes back to pool {vm.pool.name}")
    expect(dialog).to_contain_text("its disk is reverted")
    expect(dialog).to_contain_text("everything written to it since it was taken is lost")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert not Job.objects.filter(vm=vm, kind=JobKind.SHUTDOWN).exists()

    shut_down.click()
    dialog.get_by_role("button", name="Shut down").click()

    expect(page).to_have_url(re.compile(r"/vms/$"))
    expect(page.locator("#messages")).to_contain_text(f"Shut down of {vm.name} queued")
    assert Job.objects.filter(vm=vm, kind=JobKind.SHUTDOWN).count() == 1


def test_shut_down_of_a_vm_in_no_pool_asks_nothing(page, make_vm, make_user, grant):
    vm = make_vm(status=VmStatus.UP)
    user = make_user()
    grant(user, "UserRole", vm)
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")

    page.locator('#vm-panel button[data-operation="shutdown"]').click()

    expect(page.locator("#messages")).to_contain_text(f"Shut down of {vm.name} queued")
    expect(_dialog(page)).to_be_hidden()
    assert Job.objects.filter(vm=vm, kind=JobKind.SHUTDOWN).count() == 1


def test_the_dialog_takes_the_keyboard_focus_escape_cancels_and_the_focus_goes_back(page, held_vm):
    user, vm = held_vm(stateless=True)
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")
    button = page.get_by_role("button", name="Return to pool")

    button.focus()
    page.keyboard.press("Enter")
    dialog = _dialog(page)
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Escape")

    expect(dialog).to_be_hidden()
    expect(button).to_be_focused()
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id == user.pk


def test_without_javascript_return_to_pool_still_works(browser, live_server, held_vm):
    user, vm = held_vm(stateless=True)
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto("/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.goto(f"/vms/{vm.pk}/")

        page.get_by_role("button", name="Return to pool").click()

        expect(page.locator("#messages")).to_contain_text(f"VM {vm.name} went back to pool")
        assert VirtualMachine.objects.get(pk=vm.pk).owner_id is None
    finally:
        context.close()
