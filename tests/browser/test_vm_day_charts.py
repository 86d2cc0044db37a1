"""A VM's day charts in the browser: its portal page and its admin page draw CPU, memory, disk
and network I/O, with no serious accessibility violation, and a minute after they opened show
the points the sync wrote meanwhile, without a reload."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts import samples
from hosts.models import VirtualMachine, VmSample
from tests.browser.accessibility import blocking_violations
from tests.browser.conftest import log_in
from tests.browser.test_admin_grants import log_in_to_console

pytestmark = pytest.mark.slow


def vm_point(vm: VirtualMachine, at, cpu: float) -> VmSample:
    return VmSample(
        vm=vm,
        at=at,
        cpu_percent=cpu,
        memory_used_mb=200 + at.minute,
        disk_read_bps=50_000,
        disk_write_bps=20_000,
        net_rx_bps=8_000,
        net_tx_bps=3_000,
    )


def a_day_of_vm_figures(vm: VirtualMachine) -> None:
    """The VM's points of the last day, for its pages' charts (CPU 30%)."""
    now = samples.minute_of(timezone.now())
    VmSample.objects.bulk_create(
        vm_point(vm, now - timedelta(minutes=m), 30.0) for m in range(1, 24 * 60)
    )


@pytest.fixture
def held_vm(make_vm, make_cluster, make_user, grant):
    """A VM held by its owner (UserRole on it), with a day of points but the current minute."""
    owner = make_user("vm-holder")
    vm = make_vm(make_cluster(), name="web-1", memory_mb=512, owner=owner)
    grant(owner, "UserRole", vm)
    a_day_of_vm_figures(vm)
    return vm


def test_the_portal_vm_page_draws_the_day_and_shows_a_new_minute_without_a_reload(
    new_page, held_vm
):
    page = new_page()
    page.clock.install()
    log_in(page, held_vm.owner)
    page.goto(f"/vms/{held_vm.pk}/")
    charts = page.locator("#vm-day-charts")
    expect(charts.get_by_role("img")).to_have_count(4)
    expect(page.locator("#cpu-desc")).to_contain_text("CPU: now 30%")
    assert blocking_violations(page) == []

    VmSample.objects.bulk_create([vm_point(held_vm, samples.minute_of(timezone.now()), 90.0)])
    page.clock.run_for(61_000)

    expect(page.locator("#cpu-desc")).to_contain_text("CPU: now 90%")


def test_the_admin_vm_page_shows_a_new_minute_without_a_reload(new_page, make_user, held_vm):
    page = new_page()
    page.clock.install()
    log_in_to_console(page, make_user("operator", superuser=True))
    page.goto(f"/admin/hosts/virtualmachine/{held_vm.pk}/change/")
    expect(page.locator("#vm-day-charts").get_by_role("img")).to_have_count(4)
    expect(page.locator("#network-desc")).to_contain_text("Received: now 8 KiB/s")

    VmSample.objects.bulk_create([vm_point(held_vm, samples.minute_of(timezone.now()), 90.0)])
    page.clock.run_for(61_000)

    expect(page.locator("#cpu-desc")).to_contain_text("CPU: now 90%")
