"""Real QEMU hosts (lab/qemuhosts.py): started with a storage pool, stopped leaving nothing."""

import re
import shutil
from functools import partial
from io import StringIO
from pathlib import Path

import libvirt
import pytest
from django.core.management import call_command

from hosts import driver
from hosts.models import Host
from lab import qemuhosts
from tests.conftest import wait_until
from tests.hosts.driver.guests import Guest, agent_addresses

pytestmark = pytest.mark.slow


@pytest.fixture
def qemu_host():
    host = qemuhosts.QemuHost(name="qemu-stop", directory=qemuhosts.new_directory())
    yield host
    qemuhosts.stop(host)
    shutil.rmtree(host.directory, ignore_errors=True)


def running_qemu(host) -> list[int]:
    return [
        pid
        for pid in qemuhosts.leftover_pids(host)
        if b"qemu-system" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def test_a_qemu_host_has_a_running_autostarted_pool_in_its_folder(qemu_host):
    qemuhosts.start(qemu_host)
    conn = libvirt.open(qemu_host.uri)
    try:
        pool = conn.storagePoolLookupByName("corral")
        assert pool.isActive() and pool.autostart()
        assert f"<path>{qemu_host.pool_directory}</path>" in pool.XMLDesc(0)
        assert conn.getType() == "QEMU"
    finally:
        conn.close()


def test_stopping_a_qemu_host_ends_its_guests_and_every_process_it_started(qemu_host, tiny_guest):
    qemuhosts.start(qemu_host)
    conn = libvirt.open(qemu_host.uri)
    guest = Guest(conn, conn.storagePoolLookupByName("corral"), tiny_guest)
    guest.domain.create()
    conn.close()
    assert len(running_qemu(qemu_host)) == 1

    assert qemuhosts.stop(qemu_host) is True

    assert qemuhosts.leftover_pids(qemu_host) == []
    with pytest.raises(driver.HostUnreachable):
        driver.host_report(qemu_host.uri)


def test_a_qemu_host_stopped_and_started_again_resumes_its_guest_where_it_was(
    qemu_host, tiny_guest
):
    """As a real host with libvirt-guests: its running guests saved on stop (both at once),
    resumed on start (not booted again), their guest agents answering as before."""
    qemuhosts.start(qemu_host)
    conn = libvirt.open(qemu_host.uri)
    guests = [Guest(conn, conn.storagePoolLookupByName("corral"), tiny_guest) for _ in range(2)]
    for guest in guests:
        guest.boot()
        wait_until(partial(agent_addresses, guest.domain), timeout=60, message="no guest agent")
    conn.close()

    qemuhosts.stop(qemu_host)
    assert running_qemu(qemu_host) == []
    qemuhosts.start(qemu_host)

    conn = libvirt.open(qemu_host.uri)
    for guest in guests:
        domain = conn.lookupByUUIDString(guest.uuid)
        state = domain.state()
        assert state == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_RESTORED]
        assert not domain.hasManagedSaveImage(0)
        addresses = wait_until(partial(agent_addresses, domain), timeout=10, message="no agent")
        assert addresses["eth0"][0] == "10.0.2.15"
        assert guest.console().count("corral-guest: booted") == 1
    conn.close()


def test_a_folder_too_long_for_agent_sockets_is_refused():
    with pytest.raises(qemuhosts.simhosts.SimHostError, match="at most 19 characters"):
        qemuhosts.QemuHost(name="long", directory=Path("/tmp/corral-qemu-host-1"))


@pytest.fixture
def simhosts_dir(settings, tmp_path):
    base = tmp_path / "simhosts"
    settings.CORRAL_SIMHOSTS_DIR = base
    yield base
    call_command("simhosts", "stop", stdout=StringIO())
    for host in qemuhosts.discover(base):
        shutil.rmtree(host.directory, ignore_errors=True)


def test_simhosts_command_starts_registers_and_stops_qemu_hosts(db, simhosts_dir):
    call_command("simhosts", "start", "1", "--qemu", stdout=StringIO())
    call_command("simhosts", "start", "1", "--qemu", stdout=StringIO())

    host = Host.objects.get(cluster__name="qemu")
    assert host.name == "qemu-1"
    assert host.uri.startswith("qemu+unix:///session?socket=/tmp/cq-")
    assert driver.host_report(host.uri).domains == []
    status = StringIO()
    call_command("simhosts", "status", stdout=status)
    assert "qemu-qemu-1: running" in status.getvalue()

    out = StringIO()
    call_command("simhosts", "stop", stdout=out)

    assert re.fullmatch(r"qemu-qemu-1: stopped \(\d+\.\d s\)", out.getvalue().strip())
    with pytest.raises(driver.HostUnreachable):
        driver.host_report(host.uri)


def test_two_qemu_hosts_at_once_hold_blocks_of_ports_of_their_own(tmp_path):
    """Guests' screens and migrations of two lab hosts started at once (two test runs side by
    side) never race for one port: each host's daemon has a block no other live host holds."""
    first = qemuhosts.QemuHost(name="a", directory=qemuhosts.new_directory())
    second = qemuhosts.QemuHost(name="b", directory=qemuhosts.new_directory())
    try:
        blocks = {qemuhosts.claim_ports(first), qemuhosts.claim_ports(second)}
        assert len(blocks) == 2
        assert qemuhosts.claim_ports(first) in blocks  # its own claim, again
    finally:
        for host in (first, second):
            qemuhosts.release_ports(host)
            host.directory.rmdir()
