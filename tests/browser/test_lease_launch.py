"""A lease's *Launch a VM* form in a real browser: it turns off, saying why, once every reserved
instance is launched (live, as a pool card's button does), and it offers only the templates
that fit the reservation chosen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import VirtualMachine
from leases import lifecycle
from tests.browser.conftest import log_in
from tests.leases.fixtures import at, instances

pytestmark = pytest.mark.slow


def test_launching_turns_off_and_says_why_once_every_instance_is_launched(
    page, reservable_hosts, lease_user, make_lease, make_template, make_vm
):
    reservable_hosts(1)
    small = make_template(name="small", cluster=None, vcpus=1, memory_mb=1024, disk_gb=10)
    user = lease_user()
    lease = make_lease(at(9), at(17), instances(1), owner=user, name="solo")
    lifecycle.run_due_events(now=at(9))
    log_in(page, user)
    page.goto(f"/leases/{lease.pk}/")
    button = page.locator("#launch-submit")
    expect(button).to_be_enabled()

    reservation = lease.reservations.get()
    cluster = reservation.allocations.get().host.cluster
    # Launched elsewhere (the API, another tab): the page follows.
    make_vm(cluster, small, name="solo-1", reservation=reservation, owner=user)
    with page.expect_response(f"**/leases/{lease.pk}/panel/"):
        page.evaluate("document.body.dispatchEvent(new CustomEvent('corral:changed'))")

    expect(page.locator(f'[data-reservation="{reservation.pk}"] .launched')).to_have_text("1")
    expect(button).to_be_disabled()
    why = page.locator("#launch-why")
    expect(why).to_have_text(
        "The reservation's only instance is launched. Delete one of its VMs to launch another."
    )
    expect(button).to_have_attribute("aria-describedby", "launch-why")


def test_choosing_a_reservation_offers_the_templates_that_fit_it(
    page, reservable_hosts, lease_user, make_lease, make_template
):
    reservable_hosts(1)
    make_template(name="one-cpu", cluster=None, vcpus=1, memory_mb=1024, disk_gb=10)
    make_template(name="two-cpus", cluster=None, vcpus=2, memory_mb=1024, disk_gb=10)
    make_template(name="big-disk", cluster=None, vcpus=1, memory_mb=1024, disk_gb=40)
    user = lease_user()
    lease = make_lease(at(9), at(17), instances(1), instances(1, vcpus=2), owner=user, name="pair")
    lifecycle.run_due_events(now=at(9))
    first, second = lease.reservations.order_by("pk")
    log_in(page, user)
    page.goto(f"/leases/{lease.pk}/")
    form = page.locator("#launch-form")
    templates = form.get_by_label("Template").locator("option")
    expect(templates).to_have_text(["one-cpu (1 vCPU, 1024 MiB, 10 GB)"])
    form.get_by_label("VM name").fill("typed-name")

    form.get_by_label("Reservation").select_option(str(second.pk))

    expect(templates).to_have_text(
        ["one-cpu (1 vCPU, 1024 MiB, 10 GB)", "two-cpus (2 vCPU, 1024 MiB, 10 GB)"]
    )
    expect(form.get_by_label("VM name")).to_have_value("typed-name")
    form.get_by_label("Template").select_option(label="two-cpus (2 vCPU, 1024 MiB, 10 GB)")
    form.locator("#launch-submit").click()
    expect(page.locator("#messages")).to_contain_text("VM typed-name launched into lease pair.")
    vm = VirtualMachine.objects.get(name="typed-name")
    assert (vm.reservation_id, vm.vcpus) == (second.pk, 2)
    assert first.vms.count() == 0
