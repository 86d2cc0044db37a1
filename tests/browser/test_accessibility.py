"""Every portal page on a phone (390 px) and a laptop (1366 px): no sideways scrolling, no serious
or critical axe-core violation, and every control reachable with Tab and visibly focused.

A page is one entry of PAGES: where it is (a path built from the portal's objects) and what to
do once there (submit a form to show its errors); add new portal pages there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from hosts import services as host_services
from hosts.models import Image, JobKind, VirtualMachine, VmStatus
from leases.models import Lease
from pools import services as pool_services
from project.sshkeys import add_key
from tests.browser.accessibility import (
    LAPTOP,
    PHONE,
    blocking_violations,
    keyboard_gaps,
    sideways_scroll,
)
from tests.browser.conftest import log_in
from tests.browser.test_vm_day_charts import a_day_of_vm_figures
from tests.leases.fixtures import at, instances
from tests.pools.fixtures import add_pool_vms
from tests.project.sshkeys_data import ED25519

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Portal:
    """What the pages show: a user holding a pool's VM (with a job), a lease, a disk image of
    theirs with a template of it, and an SSH key."""

    user: object
    vm: VirtualMachine
    lease: Lease
    image: Image


@dataclass(frozen=True)
class PortalPage:
    name: str
    path: Callable[[Portal], str]
    then: Callable[[Page], None] | None = None  # what to do once there
    anonymous: bool = False


def _submit_empty_lease(page: Page) -> None:
    page.locator("form#lease-form").get_by_label("Name").fill("")
    page.locator("#lease-submit").click()
    expect(page.locator("#field-name .errorlist")).to_be_visible()


def _submit_empty_template(page: Page) -> None:
    page.locator("form#template-form").get_by_label("Name").fill("")
    page.locator("#template-submit").click()
    expect(page.locator("#field-name .errorlist")).to_be_visible()


def _make_token(page: Page) -> None:
    page.locator("#api-token-submit").click()
    expect(page.locator("#new-token-value")).to_be_visible()


PAGES = [
    PortalPage("log in", lambda p: "/login/", anonymous=True),
    PortalPage("take a VM", lambda p: "/"),
    PortalPage("my VMs", lambda p: "/vms/"),
    PortalPage("a VM with jobs", lambda p: f"/vms/{p.vm.pk}/"),
    PortalPage("my leases", lambda p: "/leases/"),
    PortalPage("a lease", lambda p: f"/leases/{p.lease.pk}/"),
    PortalPage("new lease with errors", lambda p: "/leases/new/", then=_submit_empty_lease),
    PortalPage("delete a lease", lambda p: f"/leases/{p.lease.pk}/delete/"),
    PortalPage("my images and templates", lambda p: "/images/"),
    PortalPage(
        "make a template with errors",
        lambda p: f"/images/{p.image.pk}/template/",
        then=_submit_empty_template,
    ),
    PortalPage("SSH keys", lambda p: "/keys/"),
    PortalPage("API tokens with a new one", lambda p: "/tokens/", then=_make_token),
    PortalPage("not found", lambda p: "/vms/999999999/"),
]


@pytest.fixture
def portal(
    make_pool,
    make_cluster,
    make_template,
    pool_user,
    grant,
    reservable_hosts,
    make_lease,
    make_image,
):
    cluster = make_cluster()
    pool = make_pool(cluster=cluster, template=make_template(), size=2, stateless=True)
    add_pool_vms(pool, [VmStatus.UP, VmStatus.UP])
    user = pool_user(pool)
    grant(user, "LeaseUser")
    vm = pool_services.allocate_vm(pool, user).vm
    a_day_of_vm_figures(vm)
    host_services.request_operation(vm, JobKind.SUSPEND, requested_by=user)
    reservable_hosts(1)
    lease = make_lease(at(9, day=1), at(17, day=1), instances(1), owner=user, name="nightly")
    make_lease(timezone.now(), at(12, day=2), instances(1), owner=user, name="build-farm")
    grant(user, "PowerUser", cluster)
    image = make_image(owner=user, visibility="private", name="my-disk")
    make_template(
        "my-template", cluster=cluster, owner=user, visibility="private", disk_image=image
    )
    add_key(user, "laptop", ED25519)
    return Portal(user=user, vm=vm, lease=lease, image=image)


def _visit(page: Page, entry: PortalPage, portal: Portal) -> None:
    page.goto(entry.path(portal))
    if entry.then:
        entry.then(page)


def _each_page(new_page, portal: Portal, viewport: dict):
    """(entry, page) for every entry of PAGES, on one signed-in page and one anonymous."""
    signed_in, anonymous = new_page(), new_page()
    for page in (signed_in, anonymous):
        page.set_viewport_size(viewport)
    log_in(signed_in, portal.user)
    for entry in PAGES:
        page = anonymous if entry.anonymous else signed_in
        _visit(page, entry, portal)
        yield entry, page


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_every_portal_page_fits_the_screen_and_has_no_serious_accessibility_violation(
    new_page, portal, viewport
):
    problems = []
    for entry, page in _each_page(new_page, portal, viewport):
        if overflow := sideways_scroll(page):
            problems.append(f"{entry.name}: scrolls {overflow} px sideways")
        problems += [f"{entry.name}: {v}" for v in blocking_violations(page)]

    assert not problems, "\n".join(problems)


def test_every_control_of_every_portal_page_takes_a_visible_keyboard_focus(new_page, portal):
    problems = []
    for entry, page in _each_page(new_page, portal, LAPTOP):
        problems += [f"{entry.name}: {gap}" for gap in keyboard_gaps(page)]

    assert not problems, "\n".join(problems)
