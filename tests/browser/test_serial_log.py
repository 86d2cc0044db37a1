"""The VM page's serial console panel in a real browser: the log rendered like a terminal,
opened at its newest line, with no escape sequence shown as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import ConsoleLog
from tests.browser.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)

# The rows of the log in view, as xterm.js mirrors them for screen readers.
LOG_ROWS = "#console-log-terminal .xterm-accessibility-tree > div"
# A boot's worth of lines, then what a login prompt sends: a cursor position request, colours.
LOG = (
    "".join(f"[    {n}.000000] kernel line {n}\r\n" for n in range(400))
    + "\x1b[6n\x1b[1;32mcorral-guest:\x1b[0m the newest line\r\n"
)


def test_the_serial_log_opens_at_its_newest_line_with_no_escape_codes_shown(
    page, make_vm, make_host, make_user, grant
):
    host = make_host(uri="qemu+unix:///session?socket=/tmp/cq-x/run/libvirt/libvirt-sock")
    vm = make_vm(cluster=host.cluster, host=host, status="up")
    ConsoleLog.objects.create(vm=vm, text=LOG, size=len(LOG))
    user = make_user()
    grant(user, "UserRole", vm)
    log_in(page, user)

    page.goto(f"/vms/{vm.pk}/")

    rows = page.locator(LOG_ROWS)
    expect(rows.filter(has_text="corral-guest: the newest line")).to_have_count(1)
    expect(rows.filter(has_text="kernel line 399")).to_have_count(1)
    expect(rows.filter(has_text="kernel line 0 ")).to_have_count(0)  # scrolled past
    shown = page.locator("#console-log-panel").inner_text()
    assert "[6n" not in shown and "[1;32m" not in shown and "[0m" not in shown
    assert "\x1b" not in shown
