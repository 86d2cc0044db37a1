"""The user portal in a real browser: logging in, taking a VM from a pool (at once, or watching
it start), giving it back, a Take button that says why it cannot work (the per-user limit,
nothing to take), reserving capacity with a lease, and what another user may not see."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts.models import VirtualMachine, VmStatus
from leases.models import Lease
from pools import services as pool_services
from tests.browser.conftest import VM_START_MS, log_in, wait_until_ready
from tests.leases.fixtures import at, instances
from tests.pools.fixtures import add_pool_vms
from tests.pools.test_return import outside

pytestmark = pytest.mark.slow

INTERMEDIATE = re.compile(r"^[1-9][0-9]?$")  # a progress bar between 0 and 100 %


def vm_of(user) -> VirtualMachine:
    return VirtualMachine.objects.get(owner=user)


def pool_card(page, pool):
    return page.locator(f'section.card.pool[data-pool="{pool.name}"]')


def vm_row(page, vm_name: str):
    return page.locator(f'#my-vms tr[data-vm="{vm_name}"]')


def test_a_user_takes_a_prestarted_vm_that_is_up_at_once_and_shutting_it_down_gives_it_back(
    page, sim_pool, pool_user, running_tasks
):
    pool = sim_pool(size=1, prestarted_vms=1)
    user = pool_user(pool)
    wait_until_ready(pool, running_tasks())

    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#login-error")).to_contain_text("enter a correct username and password")
    log_in(page, user)
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Take a VM")

    card = pool_card(page, pool)
    expect(card.locator(".ready-count")).to_have_text("1")
    card.get_by_role("button", name="Take a VM").click()

    expect(page).to_have_url(re.compile(r"/vms/\d+/$"))
    vm = VirtualMachine.objects.get(pool=pool, owner=user)
    expect(page.get_by_role("heading", level=1)).to_have_text(f"VM {vm.name}")
    expect(page.locator("#messages")).to_contain_text("is yours and already running")
    expect(page.locator("#vm-status")).to_have_attribute("data-status", VmStatus.UP)
    expect(page.locator("#vm-status")).to_have_text("Up")

    page.locator('button[data-operation="shutdown"]').click()
    # It goes back to its pool once stopped (and its stateless pool reverts it): asked first.
    page.get_by_role("dialog").get_by_role("button", name="Shut down").click()

    # Stopped, the VM goes back to its (automatic) pool and out of the user's hands: My VMs
    # follows the shutdown until it no longer lists the VM.
    expect(page).to_have_url(re.compile(r"/vms/(\?gone=1)?$"))
    expect(page.locator("#messages")).to_contain_text(f"Shut down of {vm.name} queued")
    expect(vm_row(page, vm.name)).to_have_count(0, timeout=VM_START_MS)
    expect(page.locator("#my-vms")).to_contain_text("You have no VMs.")

    page.get_by_role("navigation", name="Portal").get_by_role("link", name="Take a VM").click()
    expect(card.locator(".mine")).to_have_text("0")
    expect(card.locator(".ready-count")).to_have_text("1", timeout=VM_START_MS)


def test_a_vm_that_must_start_shows_its_progress_live_until_it_is_up(
    page, sim_pool, pool_user, running_tasks, tmp_path
):
    pool = sim_pool(size=1, prestarted_vms=0)
    user = pool_user(pool)
    go_on = tmp_path / "go-on"
    wait_until_ready(pool, running_tasks(starts_wait_for=go_on))
    log_in(page, user)
    card = pool_card(page, pool)
    expect(card.locator(".ready-count")).to_have_text("0")

    card.get_by_role("button", name="Take a VM").click()

    expect(page.locator("#messages")).to_have_text(f"VM {vm_of(user).name} is yours.")
    expect(page.locator("#vm-starting")).to_contain_text("is starting now")
    page.evaluate("window.marker = 1")
    start_job = page.locator("#vm-jobs .job").first
    bar = start_job.get_by_role("progressbar")
    expect(bar).to_have_attribute("value", INTERMEDIATE, timeout=VM_START_MS)
    go_on.touch()  # the start goes on past its hook
    expect(page.locator("#vm-status")).to_have_attribute(
        "data-status", VmStatus.UP, timeout=VM_START_MS
    )
    expect(bar).to_have_attribute("value", "100")
    expect(start_job).to_have_attribute("data-state", "succeeded")
    expect(page.locator("#vm-starting")).to_have_count(0)
    assert page.evaluate("window.marker") == 1, "the page was reloaded"


def test_a_pool_cards_name_sits_at_the_top_of_the_card(
    page, make_pool, make_cluster, make_template, pool_user
):
    pool = make_pool(cluster=make_cluster(), template=make_template(), size=1)
    add_pool_vms(pool, [VmStatus.UP])
    log_in(page, pool_user(pool))

    card = pool_card(page, pool)
    name = card.get_by_role("heading", name=pool.name)
    padding = float(card.evaluate("card => getComputedStyle(card).paddingTop").removesuffix("px"))

    gap = name.bounding_box()["y"] - card.bounding_box()["y"]
    assert gap <= padding + 2, f"{gap - padding:.0f} px of empty space above the pool's name"


def test_at_the_users_limit_take_a_vm_is_disabled_and_the_card_says_why_live(
    page, make_pool, make_cluster, make_template, pool_user
):
    pool = make_pool(cluster=make_cluster(), template=make_template(), size=2, max_user_vms=1)
    add_pool_vms(pool, [VmStatus.UP, VmStatus.UP])
    user = pool_user(pool)
    log_in(page, user)
    take = pool_card(page, pool).get_by_role("button", name="Take a VM")
    expect(take).to_be_enabled()

    pool_services.allocate_vm(pool, user)  # taken elsewhere (another tab, the API)

    expect(take).to_be_disabled()
    expect(take).to_have_accessible_description(
        "You hold 1 of 1 allowed: return one to take another."
    )
    expect(pool_card(page, pool).locator(".mine")).to_have_text("1")
    page.reload()
    expect(take).to_be_disabled()


def test_with_nothing_to_take_take_a_vm_is_disabled_and_the_card_says_why_live(
    page, make_pool, make_cluster, make_template, pool_user
):
    pool = make_pool(cluster=make_cluster(), template=make_template(), size=1, max_user_vms=1)
    add_pool_vms(pool, [VmStatus.UP])
    user, other = pool_user(pool), pool_user(pool)
    log_in(page, user)
    take = pool_card(page, pool).get_by_role("button", name="Take a VM")
    expect(take).to_be_enabled()

    pool_services.allocate_vm(pool, other)

    expect(take).to_be_disabled()
    expect(take).to_have_accessible_description(
        "Nothing to take right now: every VM of this pool is taken or busy."
    )
    expect(pool_card(page, pool).locator(".mine")).to_have_text("0")


def test_a_vm_shut_down_from_inside_leaves_its_open_page_for_my_vms(
    page, sim_pool, pool_user, running_tasks
):
    pool = sim_pool(size=1, prestarted_vms=1)
    user = pool_user(pool)
    wait_until_ready(pool, running_tasks())
    log_in(page, user)
    card = pool_card(page, pool)
    expect(card.locator(".ready-count")).to_have_text("1")
    card.get_by_role("button", name="Take a VM").click()
    expect(page.locator("#vm-status")).to_have_attribute("data-status", VmStatus.UP)
    vm = VirtualMachine.objects.select_related("host").get(pool=pool, owner=user)

    with outside(vm) as domain:
        domain.shutdown()

    expect(page).to_have_url(re.compile(r"/vms/\?gone=1$"), timeout=VM_START_MS)
    expect(page.locator("#messages")).to_contain_text("you were looking at is no longer yours")
    expect(vm_row(page, vm.name)).to_have_count(0)


def _fill_lease(page, name: str, amount: int) -> None:
    """Fill the new-lease form: ``amount`` instances of 1 vCPU and 1024 MiB, 09:00-17:00."""
    form = page.locator("form#lease-form")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Start", exact=True).fill(f"{timezone.localtime(at(9)):%Y-%m-%dT%H:%M}")
    form.get_by_label("End").fill(f"{timezone.localtime(at(17)):%Y-%m-%dT%H:%M}")
    form.get_by_label("vCPUs per instance").fill("1")
    form.get_by_label("Memory per instance (MiB)").fill("1024")
    form.get_by_label("Instances").fill(str(amount))
    form.get_by_label("Instances").dispatch_event("change")


def test_a_lease_that_fits_is_accepted_and_one_that_does_not_is_refused_with_the_reason(
    page, reservable_hosts, lease_user
):
    reservable_hosts(1)  # room for 3 instances of 1024 MiB
    user = lease_user()
    log_in(page, user)
    page.goto("/leases/new/")

    _fill_lease(page, "first", amount=2)
    expect(page.locator("#capacity-answer")).to_have_attribute("data-fits", "yes")
    page.locator("#lease-submit").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Lease first")
    expect(page.locator("#messages")).to_contain_text("Lease first accepted.")

    page.goto("/leases/new/")
    _fill_lease(page, "second", amount=2)
    answer = page.locator("#capacity-answer")
    expect(answer).to_have_attribute("data-fits", "partial")
    expect(answer).to_contain_text("Only 1 of 2 fit in that window.")
    page.locator("#lease-submit").click()

    expect(page.locator("#lease-refused")).to_contain_text(
        "The lease does not fit: only 1 of 2 instances fit between"
    )
    assert page.locator("main").inner_text().count("1 of 2") == 1  # said once, not three times
    assert list(Lease.objects.values_list("name", flat=True)) == ["first"]


def test_another_user_gets_not_found_for_a_vm_or_a_lease_that_is_not_theirs(
    new_page, make_pool, make_cluster, make_template, pool_user, reservable_hosts, make_lease
):
    pool = make_pool(cluster=make_cluster(), template=make_template(), size=1)
    add_pool_vms(pool, [VmStatus.UP])
    owner, other = pool_user(pool), pool_user(pool)
    vm = pool_services.allocate_vm(pool, owner).vm
    reservable_hosts(1)
    lease = make_lease(at(9), at(17), instances(1), owner=owner)
    urls = {f"/vms/{vm.pk}/": f"VM {vm.name}", f"/leases/{lease.pk}/": f"Lease {lease.name}"}
    owners_page, others_page = new_page(), new_page()
    log_in(owners_page, owner)
    log_in(others_page, other)

    for url, heading in urls.items():
        assert owners_page.goto(url).status == 200
        expect(owners_page.get_by_role("heading", level=1)).to_have_text(heading)
        assert others_page.goto(url).status == 404
        expect(others_page.get_by_role("heading", level=1)).to_have_text("Not found")
        expect(others_page.locator("main")).not_to_contain_text(heading)

    others_page.goto("/vms/")
    expect(others_page.locator("#my-vms")).to_contain_text("You have no VMs.")
    others_page.goto("/leases/")
    expect(others_page.locator("#my-leases")).to_contain_text("You have no leases.")
