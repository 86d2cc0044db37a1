"""The portal on a phone (390 px wide): the header's menu folds behind a Menu button and stays
inside the dark header, a table's rows become cards (each cell after its column's name, the
row's buttons on the screen) while a laptop (1280 px) keeps the table, a form's text box stays
inside its card, the lease timeline stays readable."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts.models import VmStatus
from pools import services as pool_services
from project.sshkeys import add_key
from tests.browser.conftest import log_in
from tests.leases.fixtures import at, instances
from tests.pools.fixtures import add_pool_vms
from tests.project.sshkeys_data import ED25519, RSA

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
HEADERS = ["Name", "Status", "Host", "Pool", "Lease", "Actions"]  # My VMs' columns
SMALLEST_READABLE_PX = 11  # a label's height in the browser's pixels
SHOWN_LABEL = """(td) => { const label = td.getAttribute("data-label") || "";
  return label && getComputedStyle(td, "::before").content.includes(label) ? label : ""; }"""


def _box(locator) -> dict:
    return locator.bounding_box()


def _inside(inner: dict, outer: dict) -> bool:
    return (
        inner["x"] >= outer["x"]
        and inner["y"] >= outer["y"]
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"]
    )


def _on_screen(locator, viewport: dict = PHONE) -> bool:
    """Whether the element lies within the window's width, the page scrolled to its left."""
    box = _box(locator)
    return box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]


def _label(cell) -> str:
    """The column's name the page shows before a cell's value ("" when it shows none)."""
    return cell.evaluate(SHOWN_LABEL)


def _cards(table) -> list[list[tuple[str, bool]]]:
    """Each row of the table's body: each cell's shown label and whether it lies within the
    window's width, read at one instant (a page that redraws its table live cannot swap it
    between two cells' reads)."""
    rows = table.evaluate(
        f"""(table) => Array.from(table.tBodies[0].rows, (row) => Array.from(row.cells, (td) => {{
          const box = td.getBoundingClientRect();
          return [({SHOWN_LABEL})(td), box.left >= 0 && box.right <= window.innerWidth];
        }}))"""
    )
    return [[(label, inside) for label, inside in row] for row in rows]


def _spoken(page, selector: str, role: str) -> list[str]:
    """The names of the parts of ``role`` in the element as the browser tells screen readers of
    them (its accessibility tree, through the DevTools protocol)."""
    cdp = page.context.new_cdp_session(page)
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    element = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    found = cdp.send("Accessibility.queryAXTree", {"nodeId": element, "role": role})["nodes"]
    return [node.get("name", {}).get("value", "") for node in found if not node.get("ignored")]


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


@pytest.fixture
def my_vm(make_pool, make_cluster, make_template, pool_user):
    """(user, vm): a user holding an Up VM of a pool."""
    pool = make_pool(cluster=make_cluster(), template=make_template(), size=1)
    add_pool_vms(pool, [VmStatus.UP])
    user = pool_user(pool)
    return user, pool_services.allocate_vm(pool, user).vm


def test_on_a_phone_each_of_my_vms_is_a_card_with_its_buttons_on_the_screen(page, my_vm):
    user, vm = my_vm
    page.set_viewport_size(PHONE)
    log_in(page, user)

    page.goto("/vms/")

    card = page.locator(f'#my-vms tr[data-vm="{vm.name}"]')
    expect(card).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert _box(card)["height"] < PHONE["height"] / 2, "a VM takes more than half the screen"
    assert [_label(cell) for cell in card.locator("td").all()] == HEADERS
    buttons = card.get_by_role("button").all()
    assert buttons, "the VM offers nothing to do"
    for button in buttons:
        expect(button).to_be_visible()
        assert _on_screen(button), f"{button.text_content()} is off the screen"
    card.get_by_role("button", name="Power off").click()
    expect(page.get_by_role("dialog")).to_contain_text(f"Power off {vm.name}?")


def test_on_a_phone_my_vms_stays_a_table_to_screen_readers(page, my_vm):
    user, vm = my_vm
    page.set_viewport_size(PHONE)
    log_in(page, user)

    page.goto("/vms/")

    expect(page.locator(f'#my-vms tr[data-vm="{vm.name}"]')).to_be_visible()
    assert len(_spoken(page, "#my-vms", "table")) == 1
    assert _spoken(page, "#my-vms", "columnheader") == HEADERS
    # A cell is named by its content alone: the column's name shown before it is not read twice.
    assert vm.name in _spoken(page, "#my-vms", "cell")


def test_on_a_laptop_my_vms_is_a_table_with_its_column_headers(page, my_vm):
    user, vm = my_vm
    page.set_viewport_size(LAPTOP)
    log_in(page, user)

    page.goto("/vms/")

    row = page.locator(f'#my-vms tr[data-vm="{vm.name}"]')
    for header in HEADERS:
        expect(page.get_by_role("columnheader", name=header)).to_be_visible()
    name, actions = row.locator("td").first, row.locator("td").last
    assert _box(name)["y"] == _box(actions)["y"], "a VM's cells are not side by side"
    assert _label(name) == "", "a column's name is repeated in its cells"


def test_on_a_phone_an_ssh_key_shows_when_it_was_added_and_its_delete_button(page, make_user):
    user = make_user()
    key = add_key(user, "a-long-name-for-the-laptop-at-home", RSA)
    add_key(user, "desk", ED25519)
    page.set_viewport_size(PHONE)
    log_in(page, user)

    page.goto("/keys/")

    card = page.locator(f"#ssh-key-{key.pk}")
    added = card.locator("td").nth(2)  # Added
    delete = card.get_by_role("button", name="Delete")
    for shown in (added, delete, card.locator("code")):
        expect(shown).to_be_visible()
        assert _on_screen(shown), f"{shown.text_content()} is off the screen"
    assert _label(added) == "Added"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    delete.click()
    expect(card).to_have_count(0)
    expect(page.locator("#ssh-keys tbody tr")).to_have_count(1)


def test_on_a_phone_the_public_key_box_stays_inside_its_card(page, make_user):
    user = make_user()
    page.set_viewport_size(PHONE)
    log_in(page, user)
    page.goto("/keys/")
    form = page.locator("#ssh-key-form")
    box = form.get_by_label("Public key")

    box.fill(RSA)

    assert _inside(_box(box), _box(form)), "the key's box runs out of its card"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_on_a_phone_each_event_of_a_lease_is_a_card_on_the_screen(
    page, lease_user, make_lease, reservable_hosts
):
    reservable_hosts(1)
    user = lease_user()
    lease = make_lease(at(9, day=1), at(17, day=1), instances(1), owner=user, name="nightly")
    page.set_viewport_size(PHONE)
    log_in(page, user)

    page.goto(f"/leases/{lease.pk}/")

    expect(page.locator("#lease-events tbody tr")).to_have_count(lease.events.count())
    for cells in _cards(page.locator("#lease-events")):
        assert cells == [("Event", True), ("Time", True), ("Status", True)]
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


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
