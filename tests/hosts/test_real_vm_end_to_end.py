"""A real VM's whole life on real QEMU hosts, as its admin and its user see it through the API.

The admin uploads the tiny guest's kernel, initrd and disk, makes a template of them and a pool
of one VM kept running; a user takes the VM, reads its boot in the console log, opens its screen
through the console websocket and sees its address; the return reverts its disk; the user takes
it again, the admin moves it to the other host, and its user opens its screen there at once
with the real ``openstack console url show --novnc`` against a running Corral, and types into
its serial terminal there; the admin
deletes it, leaving no volume behind. One guest boots (twice: again after the revert). Jobs and
the pool's monitor run in this process, as a task worker would run them.
"""

import asyncio
import html
import re
import secrets

import aiohttp
import libvirt
import pytest
import requests
from asgiref.sync import async_to_sync
from django.test import Client

from hosts import driver, sshtrust, sync
from hosts.driver.libvirt import volumes
from hosts.guests import guestinfo, rfb
from hosts.models import ConsoleLog, Host, JobKind, VirtualMachine
from pools import monitor
from pools.models import VmPool
from tests.conftest import unique, wait_until
from tests.hosts.driver.guests import vnc_security_types
from tests.hosts.fixtures import run_pending_jobs
from tests.hosts.guests import terminal
from tests.hosts.guests.test_guest_access import _first_bytes
from tests.hosts.guests.viewer import Rectangle, Screen, Viewer
from tests.hosts.images.uploads import upload_file
from tests.openstack.conftest import as_json

pytestmark = pytest.mark.django_db(transaction=True)
BOOTED = "corral-guest: booted"
MIB = 1024 * 1024
SCREEN_TIMEOUT_S = 60


def _upload(client, path, kind) -> int:
    image = upload_file(client, path, kind)
    assert image["sha256"] and image["size_bytes"] == path.stat().st_size
    return image["id"]


def _volumes(host: Host) -> set[str]:
    """The volumes in the host's pool, read as Corral opens the host (so also over SSH)."""
    conn = libvirt.open(sshtrust.connection_uri(host.uri))
    try:
        pool = conn.storagePoolLookupByName("corral")
        pool.refresh(0)
        return set(pool.listVolumes())
    finally:
        conn.close()


def _allocation(host: Host, name: str) -> int:
    conn = libvirt.open(host.uri)
    try:
        pool = conn.storagePoolLookupByName("corral")
        pool.refresh(0)
        return pool.storageVolLookupByName(name).info()[2]
    finally:
        conn.close()


def _shown(vm_id: int, ready):
    """Run the guest-info loop on the VM's host until ``ready(vm)``; the VM as stored."""

    def check():
        vm = VirtualMachine.objects.get(pk=vm_id)
        guestinfo.refresh_host(vm.host_id)
        vm = VirtualMachine.objects.get(pk=vm_id)
        return vm if ready(vm) else None

    return wait_until(check, timeout=90, interval=0.5, message="the guest never showed it")


def _screen_at(url: str, server: str) -> tuple[Screen, Rectangle]:
    """The screen behind the URL ``openstack console url show --novnc`` gave, opened as a
    browser opens it: the noVNC page at ``url`` (no log-in: its one-time ticket is the
    credential), then that page's websocket on the same Corral (``server``), relayed to the
    guest's screen; its ServerInit and the first rectangle of its first picture."""
    page = requests.get(url, timeout=30)
    assert page.status_code == 200, page.text[-2000:]
    websocket = html.unescape(
        re.search(r'id="console-screen"[^>]*data-url="([^"]+)"', page.text)[1]
    )
    assert websocket.startswith(f"ws{server.removeprefix('http')}/ws/console/"), websocket
    return asyncio.run(_look(websocket, origin=server))


async def _look(url: str, origin: str) -> tuple[Screen, Rectangle]:
    async with (
        asyncio.timeout(SCREEN_TIMEOUT_S),
        aiohttp.ClientSession() as session,
        session.ws_connect(url, origin=origin, protocols=("binary",)) as websocket,
    ):

        async def receive() -> bytes:
            message = await websocket.receive()
            assert message.type == aiohttp.WSMsgType.BINARY, message
            return message.data

        viewer = Viewer(receive, websocket.send_bytes)
        screen = await viewer.open()
        return screen, await viewer.first_picture(screen)


@pytest.fixture
def real_hosts(qemu_daemons, make_cluster):
    """Both QEMU hosts in a cluster of their own, synced; what the test leaves is removed."""
    cluster = make_cluster()
    hosts = [
        Host.objects.create(name=unique("qemu"), cluster=cluster, uri=daemon.uri)
        for daemon in qemu_daemons
    ]
    for host in hosts:
        sync.sync_host(host.pk)
    yield cluster, hosts
    for vm in VirtualMachine.objects.filter(cluster=cluster):
        for host in hosts:
            driver.undefine(host.uri, str(vm.uuid))
            volumes.delete(host.uri, "corral", f"{vm.uuid}.qcow2")


def test_a_user_takes_a_real_vm_sees_it_boot_opens_its_screen_and_the_admin_moves_and_deletes_it(
    real_hosts, tiny_guest, image_store, admin_user, make_user, grant, client_for, cloud
):
    cluster, hosts = real_hosts
    admin = client_for(admin_user)
    before = {host.pk: _volumes(host) for host in hosts}

    # The admin: images, a template booting them, a pool of one VM kept running.
    template = admin.post(
        "/api/templates/",
        {
            "name": unique("tiny"),
            "vcpus": 1,
            "memory_mb": 128,
            "disk_gb": 1,
            "kernel_image": _upload(admin, tiny_guest.kernel, "kernel"),
            "initrd_image": _upload(admin, tiny_guest.initrd, "initrd"),
            "disk_image": _upload(admin, tiny_guest.disk, "disk"),
            "kernel_cmdline": "console=ttyS0",
            "graphics": "vnc",
            "guest_agent": True,
        },
        format="json",
    )
    assert template.status_code == 201, template.content
    pool = admin.post(
        "/api/vmpools/",
        {
            "name": unique("pool"),
            "cluster": cluster.pk,
            "template": template.json()["id"],
            "size": 1,
            "prestarted_vms": 1,
        },
        format="json",
    )
    assert pool.status_code == 201, pool.content
    pool_id = pool.json()["id"]
    ran = run_pending_jobs()  # the VM defined on a host; the images copied to both, ahead of need
    assert [job.kind for job in ran].count(JobKind.COPY_IMAGE) == 6
    assert monitor.run_for_pool(pool_id) == 1
    (started,) = run_pending_jobs()
    assert started.kind == JobKind.START

    # The user takes it: it runs already.
    user = make_user()
    grant(user, "UserRole", VmPool.objects.get(pk=pool_id))
    taken = client_for(user).post(f"/api/vmpools/{pool_id}/allocatevm/")
    assert taken.status_code == 200, taken.content
    assert taken.json()["instant"] is True
    vm_id = taken.json()["vm"]["id"]
    vm = VirtualMachine.objects.get(pk=vm_id)
    first, second = sorted(hosts, key=lambda host: host.pk != vm.host_id)
    assert driver.domain_power_state(first.uri, str(vm.uuid)) == "running"

    def console_text(shown) -> str:
        return ConsoleLog.objects.filter(vm=shown).values_list("text", flat=True).first() or ""

    _shown(vm_id, lambda shown: BOOTED in console_text(shown))
    log = client_for(user).get(f"/api/vms/{vm_id}/console-log/")
    assert log.status_code == 200
    assert "Linux version" in log.content.decode() and BOOTED in log.content.decode()

    _shown(vm_id, lambda shown: shown.graphics_port)
    ticket = client_for(user).post(f"/api/vms/{vm_id}/console/")
    assert ticket.status_code == 201, ticket.content
    browser = Client()
    browser.force_login(user)
    path = ticket.json()["url"].removeprefix("ws://testserver")
    greeting = async_to_sync(_first_bytes)(path, f"sessionid={browser.cookies['sessionid'].value}")
    assert greeting.startswith(b"RFB 003.008")

    _shown(vm_id, lambda shown: shown.ip_addresses)
    assert client_for(user).get(f"/api/vms/{vm_id}/").json()["ip_addresses"][0] == "10.0.2.15"

    # The memory its charts show in use is the guest's own figure (its balloon driver reports
    # every 10 s): what the guest holds of its 128 MiB, caches left out.
    domain = libvirt.open(first.uri).lookupByUUIDString(str(vm.uuid))

    def reported() -> dict | None:
        stats = domain.memoryStats()
        return stats if "usable" in stats else None

    guest = wait_until(
        reported,
        timeout=30,
        message=lambda: f"no memory figures from the guest: {domain.memoryStats()}",
    )
    report = driver.host_report(first.uri, usage=True)
    (usage,) = [d.usage for d in report.domains if d.uuid == str(vm.uuid)]
    assert 0 < usage.memory_used_mb < 128
    assert guest["available"] // 1024 <= 128

    # The guest formatted its blank disk: its overlay holds that; the return throws it away.
    overlay = f"{vm.uuid}.qcow2"
    wait_until(lambda: _allocation(first, overlay) > MIB, timeout=60, message="no disk write")
    returned = client_for(user).post(f"/api/vms/{vm_id}/return/")
    assert returned.status_code == 202, returned.content
    assert [job.kind for job in run_pending_jobs()] == [JobKind.POWEROFF, JobKind.REVERT]
    assert _allocation(first, overlay) < MIB
    assert client_for(user).get(f"/api/vms/{vm_id}/").status_code == 404  # no longer theirs

    # The pool starts it again; its user takes it again, and the admin moves it to the other host.
    assert monitor.run_for_pool(pool_id) == 1
    run_pending_jobs()
    again = client_for(user).post(f"/api/vmpools/{pool_id}/allocatevm/")
    assert again.status_code == 200, again.content
    assert (again.json()["vm"]["id"], again.json()["instant"]) == (vm_id, True)
    run_pending_jobs()
    moved = admin.post(f"/api/vms/{vm_id}/migrate/", {"host": second.pk}, format="json")
    assert moved.status_code == 202, moved.content
    run_pending_jobs()
    vm.refresh_from_db()
    assert vm.host_id == second.pk
    assert driver.domain_power_state(second.uri, str(vm.uuid)) == "running"
    assert driver.domain_power_state(first.uri, str(vm.uuid)) is None
    assert {name for name in _volumes(first) if str(vm.uuid) in name} == set()  # disk, seed, log
    # Its screen opens at once on its new host (no guest-info round has run since the move): for
    # its user, with the OpenStack CLI against a running Corral, whose relay reaches the screen
    # there and shows what it draws; and for the admin, through the API.
    shown = as_json(
        cloud(user.username)("console", "url", "show", "--novnc", "-f", "json", str(vm.uuid))
    )
    assert shown["type"] == "novnc"
    screen, picture = _screen_at(shown["url"], cloud.url)
    assert screen.width >= 640 and screen.height >= 400 and str(vm.uuid).encode() in screen.name
    assert picture.encoding == 0 and picture.width * picture.height > 0
    assert picture.x + picture.width <= screen.width
    assert picture.y + picture.height <= screen.height
    ticket = admin.post(f"/api/vms/{vm_id}/console/")
    assert ticket.status_code == 201, ticket.content
    browser = Client()
    browser.force_login(admin_user)
    path = ticket.json()["url"].removeprefix("ws://testserver")
    moved_screen = async_to_sync(_first_bytes)(
        path, f"sessionid={browser.cookies['sessionid'].value}"
    )
    assert (moved_screen or b"")[:11] == b"RFB 003.008"
    # Its serial terminal too: what its user types runs in its shell there (taken just after
    # the pool restarted it, the guest may still be booting: the line is typed again).
    opened = client_for(user).post(f"/api/vms/{vm_id}/serial-console/")
    assert opened.status_code == 201, opened.content
    n = secrets.randbelow(9000) + 1000  # an answer never shown before
    answer = f"{n * 7}\r\n".encode()
    url = opened.json()["url"].replace("ws://testserver", cloud.url.replace("http", "ws", 1), 1)
    line = [f"echo $(({n}*7))\n".encode()]
    typed = asyncio.run(terminal.run(url, cloud.url, line, answer, retype_every=5))
    assert answer in (typed or b""), typed
    # Its screen stayed locked on the move: reaching the port there is not enough.
    port = driver.screen_port(second.uri, str(vm.uuid))
    assert vnc_security_types("127.0.0.1", port) == {rfb.SECURITY_VNC}

    # Deleting the pool (with force: its user holds the VM) deletes its VM: nothing of it stays
    # on either host.
    gone = admin.delete(f"/api/vmpools/{pool_id}/?force=true")
    assert gone.status_code == 204, gone.content  # gone at once; jobs remove its VM from the host
    run_pending_jobs()
    assert not VirtualMachine.objects.filter(pk=vm_id).exists()
    for host in hosts:
        assert driver.domain_power_state(host.uri, str(vm.uuid)) is None
        left = {name for name in _volumes(host) - before[host.pk] if str(vm.uuid) in name}
        assert left == set(), f"{host.name} keeps {left}"
