"""The portal on a phone (390 px wide): the header's menu folds behind a Menu button and stays
inside the dark header, wide tables scroll in their own box, the lease timeline stays readable."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts.models import VmStatus
from pools import services as pool_services
from tests.browser.conftest import log_in
from tests.leases.fixtures import at, instances
from tests.pools.fixtures import add_pool_vms

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}
SMALLEST_READABLE_PX = 11  # a label's height in the browser's pixels


def _box(locator) -> dict:
    return locator.bounding_box()


def _inside(inner: dict, outer: dict) -> bool:
    return (
        inner["x"] >= outer["x"]
        and inner["y"] >= outer["y"]
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"]
    )


def test_on_a_phone_the_menu_folds_behind_a_button_and_opens_inside_the_header(page, make_user):
    user = make_user()
    page.set_viewport_size(PHONE)
    log_in(page, user)
    header = page.locator("header.top")
    nav = page.get_by_role("navigation", name="Portal")
    menu = page.get_by_role("button", name="Menu")
    assert _box(header)["height"] < 60, "the header takes more than one line"
    expect(nav).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")

    menu.click()

    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(nav.get_by_role("link", name="SSH keys")).to_be_visible()
    log_out = page.get_by_role("button", name="Log out")
    assert _inside(_box(log_out), _box(header)), "Log out spills out of the header"
    nav.get_by_role("link", name="My leases").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("My leases")


def test_on_a_phone_my_vms_scrolls_inside_its_own_box_and_not_the_page(
    page, make_pool, make_cluster, make_template, pool_user
):
    pool = make_pool(cluster=make_cluster(), template=make_template(), size=1)
    add_pool_vms(pool, [VmStatus.UP])
    user = pool_user(pool)
    vm = pool_services.allocate_vm(pool, user).vm
    page.set_viewport_size(PHONE)
    log_in(page, user)

    page.goto("/vms/")

    region = page.get_by_role("region", name="My VMs")
    expect(region.locator(f'tr[data-vm="{vm.name}"]')).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert region.evaluate("el => el.scrollWidth > el.clientWidth"), "the table was cut off"
    region.focus()
    page.keyboard.press("ArrowRight")
    # The keyboard scrolls the table (smoothly: wait for it to move).
    page.wait_for_function("el => el.scrollLeft > 0", arg=region.element_handle(), timeout=3000)


def test_on_a_phone_the_lease_timeline_labels_are_readable(
    page, lease_user, make_lease, reservable_hosts
):
    reservable_hosts(1)
    user = lease_user()
    make_lease(timezone.now(), at(12, day=2), instances(1), owner=user, name="build-farm")
    page.set_viewport_size(PHONE)
    log_in(page, user)

    page.goto("/leases/")

    label = page.locator('#lease-timeline g.lease-bar[data-bar="build-farm"] text')
    expect(label).to_have_text("build-farm")
    assert _box(label)["height"] >= SMALLEST_READABLE_PX
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
