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

# The canvas's pixels kept in the page (before a drag), and how many of them differ from those
# it shows now, shifted left by ``shift`` pixels (as a pan by ``shift`` to the right moves them).
KEEP_PIXELS = """
() => {
  const canvas = document.querySelector("#console-screen canvas");
  window.keptPixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
}
"""
PIXELS_MOVED = """
(shift) => {
  const canvas = document.querySelector("#console-screen canvas");
  const now = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  const kept = window.keptPixels;
  let differ = 0;
  for (let y = 0; y < now.height; y++) {
    for (let x = 0; x + shift < now.width; x++) {
      const a = (y * now.width + x) * 4, b = (y * kept.width + x + shift) * 4;
      if (now.data[a] !== kept.data[b] || now.data[a + 1] !== kept.data[b + 1] ||
          now.data[a + 2] !== kept.data[b + 2]) differ++;
    }
  }
  return differ;
}
"""
# The canvas's size in pixels and as shown, and the size of the screen's box.
CANVAS_SIZES = """
() => {
  const canvas = document.querySelector("#console-screen canvas");
  const shown = canvas.getBoundingClientRect();
  const box = document.getElementById("console-screen").getBoundingClientRect();
  return { width: canvas.width, height: canvas.height, shownWidth: shown.width,
           shownHeight: shown.height, boxWidth: box.width };
}
"""


def wait_until_drawn_and_still(console) -> None:
    """Wait until the console shows the guest's screen and nothing on it moves (half a second
    apart, but for a blinking cursor); its pixels are then kept in the page (KEEP_PIXELS)."""

    def still() -> bool:
        console.evaluate(KEEP_PIXELS)
        console.wait_for_timeout(500)
        drawn = console.evaluate(CANVAS_PIXELS)["colours"] > 1
        return drawn and console.evaluate(PIXELS_MOVED, 0) < 50

    wait_until(still, timeout=DRAWN_S, interval=0.1, message="the screen never kept still")


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
    # A laptop's window starts with the screen scaled to fit its box.
    scaled = console.evaluate(CANVAS_SIZES)
    assert scaled["shownWidth"] <= scaled["boxWidth"]
    assert scaled["shownWidth"] != scaled["width"]
    scaled_width = scaled["shownWidth"]
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


def test_on_a_phone_the_screen_shows_at_actual_size_pans_by_dragging_and_takes_typed_keys(
    guest_vm, running_tiny_guest, asgi_pages
):
    vm, owner = guest_vm
    _, guest = running_tiny_guest
    _, open_page = asgi_pages()
    page = open_page(viewport=PHONE)
    log_in(page, owner)
    page.goto(f"/vms/{vm.pk}/")
    with page.expect_popup() as opened:
        page.get_by_role("button", name="Console").click()
    console = opened.value
    expect(console.locator("#console-status")).to_have_text("Connected", timeout=DRAWN_S * 1000)
    logged = len(guest.console())

    # The Keyboard button brings up the phone's keyboard (a text box takes the focus), and
    # what it types reaches the guest, also as an on-screen keyboard types it: text put in
    # the box, with no key events, and a correction replacing what it typed last. The line,
    # echoed on the screen, runs across it.
    keyboard = console.get_by_role("button", name="Keyboard")
    keyboard.click()
    keys = console.get_by_label("Keys for the guest")
    expect(keys).to_be_focused()
    expect(keyboard).to_have_attribute("aria-pressed", "true")
    console.keyboard.insert_text("echo keyboard-$((5*5))X")
    keys.evaluate("(box) => box.setSelectionRange(box.value.length - 1, box.value.length)")
    console.keyboard.insert_text(" >/dev/ttyS0 # " + "=" * 36)
    console.keyboard.press("Enter")
    wait_until(
        lambda: re.search(r"^keyboard-25\s", guest.console(logged), re.MULTILINE),
        timeout=DRAWN_S,
        interval=0.5,
        message=lambda: f"the typed line did not run: {guest.console(logged)[-500:]!r}",
    )
    keyboard.click()
    expect(keyboard).to_have_attribute("aria-pressed", "false")

    # At actual size: one canvas pixel per CSS pixel, the screen clipped to its box, and the
    # page no wider than the phone.
    scale = console.get_by_role("button", name="Scale to fit")
    expect(scale).to_have_attribute("aria-pressed", "false")
    expect(console.get_by_text("drag it to see the rest")).to_be_visible()
    actual = console.evaluate(CANVAS_SIZES)
    assert (actual["shownWidth"], actual["shownHeight"]) == (actual["width"], actual["height"])
    assert actual["width"] <= actual["boxWidth"] <= PHONE["width"]
    assert sideways_scroll(console) == 0, too_wide(console)

    # Dragging the screen 200 px to the left shows what was 200 px to the right of it.
    canvas = console.locator("#console-screen canvas").bounding_box()
    y = canvas["y"] + canvas["height"] / 2
    wait_until_drawn_and_still(console)
    console.mouse.move(canvas["x"] + 300, y)
    console.mouse.down()
    console.mouse.move(canvas["x"] + 100, y, steps=10)
    console.mouse.up()
    moved, still = console.evaluate(PIXELS_MOVED, 200), console.evaluate(PIXELS_MOVED, 0)
    assert moved < 200 < still, f"{moved} pixels differ from a 200 px pan, {still} from none"

    # Scaled to fit: the whole screen, shrunk into the phone's width.
    scale.click()
    expect(scale).to_have_attribute("aria-pressed", "true")
    expect(console.get_by_text("drag it to see the rest")).to_be_hidden()
    fitted = console.evaluate(CANVAS_SIZES)
    assert fitted["width"] > actual["width"]
    assert fitted["shownWidth"] <= fitted["boxWidth"] and fitted["shownWidth"] < fitted["width"]
    assert sideways_scroll(console) == 0, too_wide(console)


def test_the_console_and_the_terminal_fit_a_phone_pass_axe_and_their_controls_take_the_focus(
    guest_vm, asgi_pages
):
    vm, owner = guest_vm
    _, open_page = asgi_pages()
    page = open_page(viewport=PHONE)
    log_in(page, owner)
    page.goto(f"/vms/{vm.pk}/")
    problems = []
    for button, status in (("Console", "#console-status"), ("Terminal", "#terminal-status")):
        with page.expect_popup() as opened:
            page.get_by_role("button", name=button).click()
        shown = opened.value
        expect(shown.locator(status)).to_have_text("Connected", timeout=DRAWN_S * 1000)

        if overflow := sideways_scroll(shown):
            problems.append(f"{button}: scrolls {overflow} px sideways ({too_wide(shown)})")
        problems += [f"{button}: {v}" for v in blocking_violations(shown)]
        problems += [f"{button}: {gap}" for gap in keyboard_gaps(shown)]

    assert not problems, "\n".join(problems)
