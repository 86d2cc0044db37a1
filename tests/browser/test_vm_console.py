"""The VM console and serial terminal in a real browser: the user of a real guest opens its
screen from the portal and noVNC draws it, opens its serial terminal and runs a command in
it; someone who may not operate the VM gets no console and no ticket.

The tiny guest runs on a real QEMU host, its VNC on the loopback. The production web tier
(gunicorn with uvicorn workers, as `make serve` runs it) serves the portal and relays the
screen through the console websocket, which Django's live server does not serve.
"""

from __future__ import annotations

import re
import shutil

import pytest
from playwright.sync_api import expect

from hosts.guests import guestinfo
from hosts.models import ConsoleKind, ConsoleTicket, VirtualMachine
from tests.browser.accessibility import (
    PHONE,
    blocking_violations,
    keyboard_gaps,
    sideways_scroll,
    too_wide,
)
from tests.browser.conftest import log_in
from tests.conftest import unique, wait_until

# What a real guest needs here: QEMU, a session libvirtd to run it, apt to build the tiny guest.
QEMU_MISSING = [
    program
    for program in ("qemu-system-x86_64", "libvirtd", "apt-get", "dpkg-deb")
    if shutil.which(program) is None and shutil.which(program, path="/usr/sbin") is None
]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        bool(QEMU_MISSING),
        reason=f"a real QEMU guest needs {', '.join(QEMU_MISSING)} (make system-packages)",
    ),
]
DRAWN_S = 30  # from the click to the guest's screen drawn (TCG, on a shared machine)

# How many colours the console's canvas shows (up to a few), and its size.
CANVAS_PIXELS = """
() => {
  const canvas = document.querySelector("#console-screen canvas");
  if (!canvas || !canvas.width || !canvas.height) {
    return { width: canvas ? canvas.width : 0, height: canvas ? canvas.height : 0, colours: 0 };
  }
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  const colours = new Set();
  for (let i = 0; i < data.length && colours.size < 8; i += 4) {
    colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
  }
  return { width: canvas.width, height: canvas.height, colours: colours.size };
}
"""


@pytest.fixture
def guest_vm(tiny_guest_vm):
    """The running guest as a Corral VM (Up, its screen's port read from its host by the
    guest-info loop), and its user."""
    vm, owner = tiny_guest_vm
    host = vm.host

    def screen_port() -> int | None:
        guestinfo.refresh_host(host.pk)
        return VirtualMachine.objects.get(pk=vm.pk).graphics_port

    wait_until(screen_port, timeout=20, interval=0.2, message="no VNC port read")
    vm.refresh_from_db()
    return vm, owner


def test_the_console_draws_a_real_guests_screen_for_its_user_and_nothing_for_others(
    guest_vm, asgi_pages, make_user, make_role, grant
):
    vm, owner = guest_vm
    _, open_page = asgi_pages()
    page = open_page()
    log_in(page, owner)

    page.goto(f"/vms/{vm.pk}/")
    with page.expect_popup() as opened:
        page.get_by_role("button", name="Console").click()
    console = opened.value

    expect(console.get_by_role("heading", name=f"Console of {vm.name}")).to_be_visible()
    expect(console.locator("#console-status")).to_have_text("Connected", timeout=DRAWN_S * 1000)
    shown: dict = {}

    def drawn() -> bool:
        shown.update(console.evaluate(CANVAS_PIXELS))
        return shown["colours"] > 1

    wait_until(drawn, timeout=DRAWN_S, interval=0.5, message=lambda: f"a blank screen: {shown}")
    assert shown["width"] > 0 and shown["height"] > 0
    assert ConsoleTicket.objects.get(vm=vm).used_at is not None  # redeemed by that websocket

    # Someone who may see the VM but not operate it: no Console button, a 404 if they post
    # the button's form anyway, and no ticket.
    viewer = make_user()
    grant(viewer, make_role(unique("Viewer"), ["hosts.view_virtualmachine"]).name, vm)
    other = open_page()
    log_in(other, viewer)
    other.goto(f"/vms/{vm.pk}/")
    expect(other.get_by_role("heading", name=f"VM {vm.name}")).to_be_visible()
    expect(other.get_by_role("button", name="Console")).to_have_count(0)
    csrf = next(c["value"] for c in other.context.cookies() if c["name"] == "csrftoken")

    refused = other.request.post(f"/vms/{vm.pk}/console/", form={"csrfmiddlewaretoken": csrf})

    assert refused.status == 404
    assert "/ws/console/" not in refused.text()
    assert not ConsoleTicket.objects.filter(user=viewer).exists()
    assert ConsoleTicket.objects.count() == 1


# The rows of the terminal in view, as xterm.js mirrors them for screen readers.
TERMINAL_ROWS = "#terminal-screen .xterm-accessibility-tree > div"


def test_a_command_typed_in_the_terminal_runs_in_the_guest_and_shows_its_output(
    guest_vm, asgi_pages
):
    vm, owner = guest_vm
    _, open_page = asgi_pages()
    page = open_page()
    log_in(page, owner)
    page.goto(f"/vms/{vm.pk}/")
    with page.expect_popup() as opened:
        page.get_by_role("button", name="Terminal").click()
    terminal = opened.value
    expect(terminal.get_by_role("heading", name=f"Terminal of {vm.name}")).to_be_visible()
    expect(terminal.locator("#terminal-status")).to_have_text("Connected", timeout=DRAWN_S * 1000)

    terminal.keyboard.type("echo $((6*7))")
    terminal.keyboard.press("Enter")

    rows = terminal.locator(TERMINAL_ROWS)
    expect(rows.filter(has_text=re.compile(r"^\s*42\s*$"))).to_have_count(1, timeout=DRAWN_S * 1000)
    expect(rows.filter(has_text="echo $((6*7))")).to_have_count(1)
    ticket = ConsoleTicket.objects.get(vm=vm)
    assert (ticket.kind, ticket.used_at is not None) == (ConsoleKind.SERIAL, True)


def test_keys_typed_on_the_console_reach_the_guest_and_its_toolbar_works(
    guest_vm, running_tiny_guest, asgi_pages
):
    vm, owner = guest_vm
    _, guest = running_tiny_guest
    _, open_page = asgi_pages()
    page = open_page()
    log_in(page, owner)
    page.goto(f"/vms/{vm.pk}/")
    with page.expect_popup() as opened:
        page.get_by_role("button", name="Console").click()
    console = opened.value
    expect(console.locator("#console-status")).to_have_text("Connected", timeout=DRAWN_S * 1000)
    logged = len(guest.console())

    # Alt+SysRq+H on the guest's keyboard: its kernel answers on the serial console.
    console.locator("#console-screen canvas").click()
    console.keyboard.down("Alt")
    console.keyboard.down("PrintScreen")
    console.keyboard.press("h")
    console.keyboard.up("PrintScreen")
    console.keyboard.up("Alt")

    wait_until(
        lambda: "sysrq" in guest.console(logged).lower(),
        timeout=DRAWN_S,
        interval=0.5,
        message=lambda: f"the guest's kernel saw no SysRq key: {guest.console(logged)!r}",
    )
    scaled_width = console.locator("#console-screen canvas").bounding_box()["width"]
    scale = console.get_by_role("button", name="Scale to fit")
    expect(scale).to_have_attribute("aria-pressed", "true")
    scale.click()
    expect(scale).to_have_attribute("aria-pressed", "false")
    assert console.locator("#console-screen canvas").bounding_box()["width"] != scaled_width
    console.get_by_role("button", name="Full screen").click()
    expect(console.get_by_role("button", name="Full screen")).to_have_attribute(
        "aria-pressed", "true"
    )
    assert console.evaluate("document.fullscreenElement.contains(document.querySelector('canvas'))")
    console.get_by_role("button", name="Full screen").click()
    expect(console.get_by_role("button", name="Full screen")).to_have_attribute(
        "aria-pressed", "false"
    )
    expect(console.get_by_role("button", name="Send Ctrl-Alt-Del")).to_be_enabled()
    # The screen's shell (logged in as the guest's user) runs what is typed, and what is pasted.
    console.locator("#console-screen canvas").click()
    # As a person types: Shift held for the characters that need it (a browser's key events
    # carry the key's code, which the guest's keyboard gets).
    for part, shifted in (("echo typed", False), ("_", True), ("on", False), (">", True)):
        if shifted:
            console.keyboard.down("Shift")
        console.keyboard.type(part)
        if shifted:
            console.keyboard.up("Shift")
    console.keyboard.type("/dev/tty")
    console.keyboard.down("Shift")
    console.keyboard.type("S")
    console.keyboard.up("Shift")
    console.keyboard.type("0")
    console.keyboard.press("Enter")
    wait_until(
        lambda: "typed_on" in guest.console(logged),
        timeout=DRAWN_S,
        interval=0.5,
        message=lambda: f"the screen's shell ran nothing typed: {guest.console(logged)[-500:]!r}",
    )
    console.get_by_label("Text to type into the guest").fill("echo pasted-$((3*4)) >/dev/ttyS0\n")
    console.get_by_role("button", name="Paste text").click()
    expect(console.get_by_label("Text to type into the guest")).to_have_value("")

    wait_until(
        lambda: "pasted-12" in guest.console(logged),
        timeout=DRAWN_S,
        interval=0.5,
        message=lambda: f"the pasted line did not run: {guest.console(logged)[-500:]!r}",
    )


def test_the_console_and_the_terminal_fit_a_phone_pass_axe_and_their_controls_take_the_focus(
    guest_vm, asgi_pages
):
    vm, owner = guest_vm
    _, open_page = asgi_pages()
    page = open_page()
    log_in(page, owner)
    page.goto(f"/vms/{vm.pk}/")
    problems = []
    for button, status in (("Console", "#console-status"), ("Terminal", "#terminal-status")):
        with page.expect_popup() as opened:
            page.get_by_role("button", name=button).click()
        shown = opened.value
        shown.set_viewport_size(PHONE)
        expect(shown.locator(status)).to_have_text("Connected", timeout=DRAWN_S * 1000)

        if overflow := sideways_scroll(shown):
            problems.append(f"{button}: scrolls {overflow} px sideways ({too_wide(shown)})")
        problems += [f"{button}: {v}" for v in blocking_violations(shown)]
        problems += [f"{button}: {gap}" for gap in keyboard_gaps(shown)]

    assert not problems, "\n".join(problems)
