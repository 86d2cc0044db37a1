"""Reaching a real guest on real QEMU: its serial console log, its address and its screen.

One tiny guest boots for the module, defined with the devices Corral gives every VM (serial
console logged into the host's storage pool, guest agent channel, VNC on the loopback:
``hosts.driver.libvirt.guests.devices_xml``). The guest-info loop copies what it shows into the
database; the API answers from there, and the console websocket relays its VNC stream.
"""

import re
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import libvirt
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from hosts.driver.libvirt import guests
from hosts.driver.libvirt.storage import storage_pool_path
from hosts.guests import cloudinit, consoles, guestinfo, rfb
from hosts.guests.console_relay import ConsoleRelay
from hosts.models import ConsoleLog, ConsoleTicket, Host, VirtualMachine
from lab import qemuhosts
from tests.conftest import wait_until
from tests.hosts.driver.guests import Guest, lines, vnc_login, vnc_security_types
from tests.hosts.guests.viewer import Viewer
from tests.project.sshkeys_data import ED25519, RSA

BOOTED = "corral-guest: booted"
LOOPBACK = "127.0.0.1"
HOSTNAME = "corral-vm-1"
KEYS = (ED25519, RSA)
ORIGIN = (b"origin", b"http://testserver")


@pytest.fixture(scope="module")
def booted(qemu_daemons, tiny_guest):
    """The tiny guest, running with Corral's guest devices on the first QEMU host."""
    daemon = qemu_daemons[0]
    conn = libvirt.open(daemon.uri)
    pool = conn.storagePoolLookupByName("corral")
    guest = Guest(conn, pool, tiny_guest)
    seed = cloudinit.nocloud_iso(
        f"instance-id: {guest.uuid}\nlocal-hostname: {HOSTNAME}\n",
        "#cloud-config\nssh_authorized_keys:\n" + "".join(f"- {k}\n" for k in KEYS),
    )
    assert guests.write_seed(daemon.uri, guest.uuid, seed)
    # The helper's own seed CD-ROM and devices give way to those Corral defines.
    xml = guest.domain.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    xml = re.sub(r"<disk type='file' device='cdrom'>.*?</disk>", "", xml, flags=re.S)
    devices = guests.devices_xml(conn, guest.uuid, guests.GuestDevices(guest_agent=True, seed=True))
    guest.domain = conn.defineXML(xml[: xml.index("<serial")] + devices + "</devices></domain>")
    guest.log = f"{storage_pool_path(pool)}/{guests.log_volume(guest.uuid)}"
    try:
        guest.first_boot = guest.boot()
        yield daemon, guest
    finally:
        guest.remove()
        guests.remove_guest_files(daemon.uri, guest.uuid)
        conn.close()


@pytest.fixture
def guest_vm(booted, make_cluster, make_template, make_vm, make_user, grant):
    """The booted guest as a Corral VM (Up on its host), and a user who may operate it."""
    daemon, guest = booted
    cluster = make_cluster()
    host = Host.objects.create(name="qemu-guest", cluster=cluster, uri=daemon.uri, status="up")
    template = make_template(guest_agent=True, vcpus=1, memory_mb=128, disk_gb=1)
    vm = make_vm(cluster=cluster, template=template, host=host, status="up")
    VirtualMachine.objects.filter(pk=vm.pk).update(uuid=guest.uuid)
    user = make_user()
    grant(user, "UserRole", vm)
    vm.refresh_from_db()
    return vm, user


def refreshed(vm, ready):
    """Run the guest-info loop for the VM's host until ``ready(vm)``; the VM as stored."""

    def check():
        guestinfo.refresh_host(vm.host_id)
        fresh = VirtualMachine.objects.get(pk=vm.pk)
        return fresh if ready(fresh) else None

    return wait_until(check, timeout=40, interval=0.5, message="the guest never showed it")


def test_the_guest_reads_the_seed_corral_wrote_for_it(booted):
    _, guest = booted

    boot = lines(guest.first_boot)

    assert f"corral-guest: hostname {HOSTNAME}" in boot
    assert f"corral-guest: ssh-keys {len(KEYS)}" in boot


def console_text(vm) -> str:
    return ConsoleLog.objects.filter(vm=vm).values_list("text", flat=True).first() or ""


def test_the_console_log_shows_the_guests_boot_to_those_who_may_operate_it(
    guest_vm, client_for, make_user, grant, make_role
):
    vm, user = guest_vm
    refreshed(vm, lambda fresh: BOOTED in console_text(fresh))

    response = client_for(user).get(f"/api/vms/{vm.pk}/console-log/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert "corral-guest: ip 10.0.2.15" in text and BOOTED in text
    assert "Linux version" in text  # the kernel's own first lines
    viewer = make_user()
    grant(viewer, make_role("Viewer", ["hosts.view_virtualmachine"]).name, vm)
    assert client_for(viewer).get(f"/api/vms/{vm.pk}/console-log/").status_code == 403
    assert client_for(make_user()).get(f"/api/vms/{vm.pk}/console-log/").status_code == 404


def test_the_guest_agent_gives_the_vm_its_address(guest_vm, client_for):
    vm, user = guest_vm

    refreshed(vm, lambda fresh: fresh.ip_addresses)

    shown = client_for(user).get(f"/api/vms/{vm.pk}/").json()
    assert shown["ip_addresses"][0] == "10.0.2.15"  # then its IPv6 addresses, if any


def _ticket(client, vm) -> str:
    response = client.post(f"/api/vms/{vm.pk}/console/")
    assert response.status_code == 201, response.content
    url = response.json()["url"]
    assert url.startswith("ws://testserver/ws/console/")
    return url.removeprefix("ws://testserver")


async def _first_bytes(path: str, cookie: str | None = None) -> bytes | None:
    headers = [ORIGIN] + ([(b"cookie", cookie.encode())] if cookie else [])
    from project.asgi import application

    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=15)
    if not connected:
        return None
    greeting = b""
    while len(greeting) < 12:
        greeting += await communicator.receive_from(timeout=15)
    await communicator.disconnect()
    return greeting


@pytest.mark.django_db(transaction=True)
def test_the_console_websocket_relays_the_guests_vnc_once_per_ticket(
    guest_vm, client_for, time_machine
):
    vm, user = guest_vm
    port = refreshed(vm, lambda fresh: fresh.graphics_port).graphics_port
    # On its lab host's own block of ports, never the 5900 another daemon may race for.
    offset = port - qemuhosts.PORT_BASE
    assert 0 <= offset < qemuhosts.PORT_BLOCKS * qemuhosts.PORTS_PER_HOST
    assert offset % qemuhosts.PORTS_PER_HOST < qemuhosts.PORTS_EACH  # its block's screens part
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    path = _ticket(client_for(user), vm)

    first = async_to_sync(_first_bytes)(path, cookie)
    again = async_to_sync(_first_bytes)(path, cookie)

    assert first.startswith(b"RFB 003.00")
    assert again is None  # a ticket opens the screen once
    late = _ticket(client_for(user), vm)
    time_machine.move_to(timezone.now() + timedelta(seconds=61))
    assert async_to_sync(_first_bytes)(late, cookie) is None
    assert ConsoleTicket.objects.filter(used_at__isnull=True).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_console_ticket_is_only_for_who_asked_and_only_with_operate(
    guest_vm, client_for, make_user, grant, make_role
):
    vm, user = guest_vm
    refreshed(vm, lambda fresh: fresh.graphics_port)
    viewer, stranger = make_user(), make_user()
    grant(viewer, make_role("Viewer", ["hosts.view_virtualmachine"]).name, vm)
    path = _ticket(client_for(user), vm)
    other = Client()
    other.force_login(stranger)

    refused = async_to_sync(_first_bytes)(path, f"sessionid={other.cookies['sessionid'].value}")

    assert refused is None
    assert client_for(viewer).post(f"/api/vms/{vm.pk}/console/").status_code == 404
    assert client_for(stranger).post(f"/api/vms/{vm.pk}/console/").status_code == 404


def _graphics(domain) -> ElementTree.Element:
    xml = domain.XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE)
    return ElementTree.fromstring(xml).find("devices/graphics[@type='vnc']")


@pytest.mark.django_db(transaction=True)
def test_the_screen_wants_a_password_nobody_is_told_until_a_console_opens(guest_vm):
    vm, _ = guest_vm
    port = refreshed(vm, lambda fresh: fresh.graphics_port).graphics_port
    guest = VirtualMachine.objects.get(pk=vm.pk)
    domain = libvirt.open(guest.host.uri).lookupByUUIDString(str(guest.uuid))

    # Never "None": reaching the port is not enough.
    assert vnc_security_types(LOOPBACK, port) == {rfb.SECURITY_VNC}
    assert vnc_login(LOOPBACK, port, "") != 0
    assert vnc_login(LOOPBACK, port, "corral") != 0

    opened = consoles.screen_credential(guest)
    assert opened.port == port and len(opened.password) == 8
    valid_to = datetime.fromisoformat(_graphics(domain).get("passwdValidTo")).replace(tzinfo=UTC)
    assert timedelta(0) < valid_to - timezone.now() <= timedelta(seconds=60)
    assert vnc_login(LOOPBACK, port, opened.password) == 0
    assert vnc_login(LOOPBACK, port, opened.password[::-1]) != 0
    # The next console's password replaces it: the first no longer opens the screen.
    assert consoles.screen_credential(guest).password != opened.password
    assert vnc_login(LOOPBACK, port, opened.password) != 0


async def _open_screen(path: str, cookie: str) -> tuple[int, int, bytes] | None:
    """Open the console websocket as noVNC does (``viewer.Viewer``): the screen's width,
    height and name from its ServerInit."""
    from project.asgi import application

    headers = [ORIGIN, (b"cookie", cookie.encode())]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=15)
    if not connected:
        return None

    async def send(data: bytes) -> None:
        await communicator.send_to(bytes_data=data)

    try:
        screen = await Viewer(lambda: communicator.receive_from(timeout=15), send).open()
        return screen.width, screen.height, screen.name
    finally:
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
def test_the_console_relay_signs_in_to_the_screen_for_the_browser(guest_vm, client_for):
    vm, user = guest_vm
    refreshed(vm, lambda fresh: fresh.graphics_port)
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"

    width, height, name = async_to_sync(_open_screen)(_ticket(client_for(user), vm), cookie)
    again = async_to_sync(_open_screen)(_ticket(client_for(user), vm), cookie)

    assert (width, height) == (again[0], again[1]) and width >= 640 and height >= 400
    assert name == again[2] and name  # QEMU names the screen after the guest


@pytest.mark.django_db(transaction=True)
def test_a_relay_whose_password_another_console_replaced_sets_a_new_one_and_signs_in(guest_vm):
    """Each redemption sets its own password, replacing any other: a relay that had not signed
    in yet when another console of the VM opened sets a new one and signs in again."""
    vm, _ = guest_vm
    refreshed(vm, lambda fresh: fresh.graphics_port)
    guest = VirtualMachine.objects.select_related("host").get(pk=vm.pk)
    stale = consoles.screen_credential(guest)
    consoles.screen_credential(guest)  # another console opened in between
    assert vnc_login(LOOPBACK, stale.port, stale.password) != 0
    relay = ConsoleRelay()

    async def reach() -> bool:
        await relay._reach(stale)
        signed_in = relay.writer is not None  # the screen waits for the browser's ClientInit
        relay._close_host()
        return signed_in

    assert async_to_sync(reach)()
