"""The serial terminal is offered where it can work, and where it cannot the user reads why: a
VM on a host whose guests have no serial console (a simulated host) has no Terminal button and
its page says so; a terminal whose console the host could not open says the host's answer in
words, not that its ticket may have expired."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in

pytestmark = pytest.mark.slow


@pytest.fixture
def running_on(make_vm, make_host, make_user, grant):
    """running_on(uri) -> (a running VM on a host at ``uri``, its user)."""

    def make(uri: str):
        host = make_host(uri=uri)
        vm = make_vm(cluster=host.cluster, host=host, status="up")
        user = make_user()
        grant(user, "UserRole", vm)
        return vm, user

    return make


def test_a_vm_on_a_simulated_host_offers_no_terminal_and_says_why(page, running_on):
    vm, user = running_on("test+unix:///default?socket=/tmp/corral-sim-x/sim-1/libvirt-sock")
    log_in(page, user)

    page.goto(f"/vms/{vm.pk}/")

    expect(page.locator("#vm-status")).to_have_attribute("data-status", "up")
    expect(page.get_by_role("button", name="Terminal")).to_have_count(0)
    expect(page.locator("#vm-no-terminal")).to_have_text(
        f"VM {vm.name} has no terminal: its host {vm.host.name} gives its guests no serial "
        "console (simulated hosts have none)."
    )


def test_a_terminal_the_host_cannot_open_says_why_in_words(asgi_pages, running_on):
    # A QEMU host whose daemon is gone: the ticket is good, the console cannot be opened.
    vm, user = running_on("qemu+unix:///session?socket=/tmp/cq-gone/run/libvirt/libvirt-sock")
    _, open_page = asgi_pages()
    page = open_page()
    log_in(page, user)
    page.goto(f"/vms/{vm.pk}/")

    with page.expect_popup() as opened:
        page.get_by_role("button", name="Terminal").click()

    terminal = opened.value
    expect(terminal.locator("#terminal-status")).to_have_text(
        "The host does not answer. Open the terminal again from the VM's page to retry.",
        timeout=20_000,
    )
