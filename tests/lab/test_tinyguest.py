"""The tiny guest on a real QEMU host, driven by plain libvirt calls.

What real VMs will stand on: volumes uploaded into the host's ``corral`` pool through libvirt
streams, a qcow2 overlay over a base disk, a domain whose type, emulator and machine the host
names (KVM where the daemon may use it), and a guest that boots, reports itself on its serial
console and through its agent, lets its login user in by SSH with the seed's key and then with
the keys the agent sets, shows a VNC screen whose keyboard reaches a logged-in shell, obeys the
power button and the agent, and counts boots on its disk.
"""

import grp
import os
import socket
import subprocess
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import libvirt
import pytest

from hosts.driver.libvirt.domains import hypervisor
from hosts.models import Host, VirtualMachine, VmStatus
from hosts.sync import sync_host
from lab import simhosts, tinyguest
from lab.tinyguest import LOGIN_USER
from tests.conftest import wait_until
from tests.hosts.driver.guests import (
    HOSTNAME,
    SSH_KEYS,
    Guest,
    agent_addresses,
    free_port,
    lines,
    overlay,
    ssh,
    ssh_key,
    type_on_keyboard,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two key pairs: ``seed`` is in the guest's seed, ``other`` is not."""
    folder = tmp_path_factory.mktemp("ssh-keys")
    seed, seed_public = ssh_key(folder, "seed")
    other, other_public = ssh_key(folder, "other")
    return SimpleNamespace(
        seed=seed, seed_public=seed_public, other=other, other_public=other_public
    )


@pytest.fixture(scope="module")
def guest(qemu_daemons, tiny_guest, keys):
    """The tiny guest, booted once, on the first QEMU host; its SSH port on 127.0.0.1."""
    conn = libvirt.open(qemu_daemons[0].uri)
    pool = conn.storagePoolLookupByName("corral")
    guest = Guest(
        conn, pool, tiny_guest, ssh_port=free_port(), ssh_keys=(*SSH_KEYS, keys.seed_public)
    )
    try:
        guest.first_boot = guest.boot()
        yield guest
    finally:
        guest.remove()
        conn.close()


def test_the_guest_boots_and_tells_on_its_serial_console_what_it_found(guest):
    first_boot = lines(guest.first_boot)

    assert "corral-guest: ip 10.0.2.15" in first_boot
    assert "corral-guest: boot 1" in first_boot
    assert f"corral-guest: hostname {HOSTNAME}" in first_boot
    assert f"corral-guest: ssh-keys {len(SSH_KEYS) + 1}" in first_boot
    assert any(line.startswith("corral-guest: agent /dev/vport") for line in first_boot)
    assert "corral-guest: sshd" in first_boot


def kvm_usable_by_the_daemons_user() -> bool:
    """Whether guests can run on KVM here: the CPU has VT-x or AMD-V (without them a /dev/kvm
    may open yet boot no ordinary kernel), and the user lab daemons run as, with the group kvm
    when there is one, can open /dev/kvm for reading and writing, tried as that user."""
    flags = Path("/proc/cpuinfo").read_text().split()
    if not os.path.exists("/dev/kvm") or not {"vmx", "svm"} & set(flags):
        return False
    if os.geteuid() != 0:
        return os.access("/dev/kvm", os.R_OK | os.W_OK)
    try:
        groups = ["-G", grp.getgrnam("kvm").gr_name]
    except KeyError:
        groups = []
    opened = subprocess.run(
        ["runuser", "-u", simhosts.UNPRIVILEGED_USER, *groups, "--", "sh", "-c", ": <> /dev/kvm"],
        capture_output=True,
        timeout=30,
    )
    return opened.returncode == 0


def test_the_guest_runs_on_kvm_exactly_when_the_daemons_user_may_open_dev_kvm(guest):
    expected = "kvm" if kvm_usable_by_the_daemons_user() else "qemu"

    assert hypervisor(guest.conn).domain_type == expected
    assert ElementTree.fromstring(guest.domain.XMLDesc(0)).get("type") == expected
    assert "corral-guest: booted" in guest.first_boot  # and it booted on it


def test_the_login_user_logs_in_by_ssh_with_the_seeds_key_and_then_with_the_agents_keys(
    guest, keys
):
    if not guest.domain.isActive():
        guest.boot()

    def logs_in(key) -> bool:
        done = ssh(guest.ssh_port, key, "whoami; hostname")
        assert done.returncode in (0, 255), done.stderr
        if done.returncode == 0:
            assert done.stdout.split() == [LOGIN_USER, HOSTNAME]
        return done.returncode == 0

    boots = guest.console().count("corral-guest: booted")
    assert logs_in(keys.seed)
    assert not logs_in(keys.other)

    # The agent replaces the keys in the running guest: no reboot, the new key in, the old out.
    guest.domain.authorizedSSHKeysSet(LOGIN_USER, [keys.other_public], 0)
    assert guest.domain.authorizedSSHKeysGet(LOGIN_USER) == [keys.other_public]
    assert logs_in(keys.other)
    assert not logs_in(keys.seed)

    guest.domain.authorizedSSHKeysSet(
        LOGIN_USER, [keys.seed_public], libvirt.VIR_DOMAIN_AUTHORIZED_SSH_KEYS_SET_APPEND
    )
    guest.domain.authorizedSSHKeysSet(
        LOGIN_USER, [keys.other_public], libvirt.VIR_DOMAIN_AUTHORIZED_SSH_KEYS_SET_REMOVE
    )
    assert guest.domain.authorizedSSHKeysGet(LOGIN_USER) == [keys.seed_public]
    assert logs_in(keys.seed)
    assert not logs_in(keys.other)
    assert guest.console().count("corral-guest: booted") == boots  # all without a reboot


def test_the_guest_agent_reports_the_address_the_guest_took(guest):
    addresses = wait_until(
        lambda: agent_addresses(guest.domain).get("eth0"),
        timeout=20,
        message="The guest agent reported no address on eth0.",
    )

    assert "10.0.2.15" in addresses


def test_the_guest_screen_answers_vnc_on_the_loopback_address(guest):
    graphics = ElementTree.fromstring(guest.domain.XMLDesc(0)).find("devices/graphics")
    assert graphics.get("listen") == "127.0.0.1"

    with socket.create_connection(("127.0.0.1", int(graphics.get("port"))), timeout=10) as vnc:
        greeting = b""
        while len(greeting) < 12:
            chunk = vnc.recv(12 - len(greeting))
            assert chunk, "the VNC server closed the connection"
            greeting += chunk

    assert greeting == b"RFB 003.008\n"


def test_keys_typed_on_the_screen_reach_a_shell_logged_in_as_the_login_user(guest):
    if not guest.domain.isActive():
        guest.boot()
    offset = os.path.getsize(guest.log)

    def typed_line_reached_the_console() -> bool:
        if f"typed by {LOGIN_USER}" in guest.console(offset):
            return True
        # The screen's shell (tty1) writes to the serial port, whose log the test reads. Typed
        # again until it does: keys pressed before the shell starts (just after a boot) are lost.
        type_on_keyboard(guest.domain, "echo typed by $(whoami) >/dev/ttyS0\n")
        return False

    wait_until(
        typed_line_reached_the_console,
        timeout=60,
        interval=3,
        message=lambda: "Nothing typed reached the console:\n" + guest.console(offset)[-2000:],
    )
    # The serial console's own shell is the login user's too (its prompt names the user).
    assert f"{LOGIN_USER}@{HOSTNAME}:~$" in guest.console()


def test_the_sync_measures_host_and_guest_cpu_from_libvirts_counters(
    guest, qemu_daemons, make_cluster, make_template, make_vm
):
    if not guest.domain.isActive():
        guest.boot()
    cluster = make_cluster()
    host = Host.objects.create(cluster=cluster, name="cpu-host", uri=qemu_daemons[0].uri)
    vm = make_vm(
        cluster=cluster,
        template=make_template(vcpus=1, memory_mb=tinyguest.MEMORY_MIB, disk_gb=1),
        uuid=guest.domain.UUIDString(),
        host=host,
        status=VmStatus.UP,
    )
    assert (host.cpu_usage_percent, vm.cpu_usage_percent) == (None, None)

    def measured():
        sync_host(host.pk)
        host.refresh_from_db()
        vm.refresh_from_db()
        return host.cpu_usage_percent is not None and vm.cpu_usage_percent is not None

    # The first report of a host only gives counters; the load is the change to the next.
    wait_until(measured, timeout=20, message="the sync wrote no measured CPU load")

    assert 0.0 < host.cpu_usage_percent <= 100.0  # this very machine runs the test
    assert 0.0 <= vm.cpu_usage_percent <= 100.0
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.UP


def test_power_button_and_agent_shut_the_guest_down_and_its_disk_keeps_counting(guest):
    if not guest.domain.isActive():
        guest.boot()

    guest.domain.shutdownFlags(libvirt.VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)
    guest.wait_off()
    second_boot = guest.boot()
    wait_until(lambda: agent_addresses(guest.domain).get("eth0"), timeout=20)
    try:
        guest.domain.shutdownFlags(libvirt.VIR_DOMAIN_SHUTDOWN_GUEST_AGENT)
    except libvirt.libvirtError as exc:
        # guest-shutdown never answers: libvirt waits for QEMU's shutdown event, and a busy
        # machine may see the agent's socket close first. The guest powers off all the same.
        if "End of file from agent socket" not in str(exc):
            raise
    guest.wait_off()

    assert "corral-guest: boot 2" in lines(second_boot)


def test_a_recreated_overlay_gives_the_guest_a_blank_disk_again(guest):
    if guest.domain.isActive():
        guest.domain.destroy()
    guest.volumes["overlay"].delete(0)
    guest.volumes["overlay"] = overlay(guest.pool, f"{guest.uuid}.qcow2", guest.volumes["base"])

    fresh_boot = guest.boot()
    guest.domain.destroy()

    assert "corral-guest: boot 1" in lines(fresh_boot)
