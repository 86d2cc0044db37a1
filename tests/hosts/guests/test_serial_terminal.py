"""The serial terminal on a real guest: a ticket from the API opens the guest's serial console
through the production web tier (gunicorn with uvicorn workers, as `make serve` runs it) once,
and what a websocket client types runs in the guest's shell.

One tiny guest boots for the module on a real QEMU host; its serial console runs a shell
(lab/tinyguest_files/init). The websocket client is aiohttp's, over a real socket.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest
from django.test import Client

from hosts.guests import guestinfo
from hosts.models import ConsoleTicket, VirtualMachine
from tests.conftest import wait_until
from tests.hosts.guests import terminal

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def web(asgi_server):
    """The production web tier on the test database."""
    return asgi_server()


def test_a_ticket_opens_the_guests_shell_once_and_what_is_typed_runs_there(tiny_guest_vm, web):
    vm, user = tiny_guest_vm
    client = Client()
    client.force_login(user)
    response = client.post(f"/api/vms/{vm.pk}/serial-console/")
    assert response.status_code == 201, response.content
    url = response.json()["url"]
    assert url.startswith("ws://testserver/ws/serial/")

    a, b = secrets.randbelow(9000) + 1000, secrets.randbelow(9000) + 1000  # never shown before
    answer = f"{a * b}\r\n".encode()
    shown = asyncio.run(
        terminal.run(terminal.ws_url(web, url), web.url, [f"echo $(({a}*{b}))\n".encode()], answer)
    )
    again = asyncio.run(terminal.run(terminal.ws_url(web, url), web.url, [b"\n"], b"#"))

    assert answer in shown  # the shell's answer, not the echoed line "echo $((a*b))"
    assert again is None  # a ticket opens the terminal once
    assert ConsoleTicket.objects.get().used_at is not None


def test_text_frames_are_typed_as_utf8(tiny_guest_vm, web):
    vm, user = tiny_guest_vm
    client = Client()
    client.force_login(user)
    url = client.post(f"/api/vms/{vm.pk}/serial-console/").json()["url"]

    n = secrets.randbelow(9000) + 1000
    answer = f"é-{n + 1}\r\n".encode()
    shown = asyncio.run(
        terminal.run(terminal.ws_url(web, url), web.url, [f"echo é-$(({n}+1))\n"], answer)
    )

    assert answer in shown


def test_a_terminal_opens_on_the_prompt_the_guest_printed_before_anyone_connected(
    tiny_guest_vm, web
):
    vm, user = tiny_guest_vm
    client = Client()
    client.force_login(user)
    url = client.post(f"/api/vms/{vm.pk}/serial-console/").json()["url"]

    shown = asyncio.run(terminal.run(terminal.ws_url(web, url), web.url, [], b"corral@"))

    last_line = shown.rsplit(b"\r\n", 1)[-1]
    assert last_line.startswith(b"corral@tiny-guest:~$ ")  # its prompt, nothing typed yet


def test_a_screen_ticket_opens_no_terminal_and_a_terminal_ticket_no_screen(tiny_guest_vm, web):
    vm, user = tiny_guest_vm

    def screen_port() -> int | None:
        guestinfo.refresh_host(vm.host_id)
        return VirtualMachine.objects.get(pk=vm.pk).graphics_port

    wait_until(screen_port, timeout=20, interval=0.2, message="no VNC port read")
    client = Client()
    client.force_login(user)
    screen = client.post(f"/api/vms/{vm.pk}/console/").json()["url"]
    serial = client.post(f"/api/vms/{vm.pk}/serial-console/").json()["url"]

    screen_as_terminal = screen.replace("/ws/console/", "/ws/serial/")
    terminal_as_screen = serial.replace("/ws/serial/", "/ws/console/")

    assert (
        asyncio.run(terminal.run(terminal.ws_url(web, screen_as_terminal), web.url, [b"\n"], b"#"))
        is None
    )
    assert (
        asyncio.run(terminal.run(terminal.ws_url(web, terminal_as_screen), web.url, [], b"RFB"))
        is None
    )
