"""The Debian cloud image (lab/cloudimage.py) booted cold on a real QEMU host, as a user's VM.

Real cloud-init reads a NoCloud seed made by Corral (``hosts.guests.cloudinit.nocloud_iso``):
the hostname, an SSH key and a command. The guest's port 22 is published on the host's
loopback address through QEMU's user-mode network, and the system's ``ssh`` logs in as
``debian``. One boot serves every test; it takes a minute or more under TCG.
"""

import contextlib
import socket
import subprocess
import time
import uuid
from xml.etree import ElementTree
from xml.sax.saxutils import escape, quoteattr

import libvirt
import pytest

from hosts.guests.cloudinit import nocloud_iso
from lab import cloudimage
from tests.conftest import wait_until
from tests.hosts.driver.guests import agent_addresses, upload

pytestmark = pytest.mark.slow

HOSTNAME = "cloud-guest"
RUNCMD_FILE = "/var/tmp/corral-runcmd"
# Cold boot to SSH took 54-73 s under TCG on 2 idle cores; a loaded machine takes longer.
SSH_TIMEOUT_S = 420
SSH_ATTEMPT_TIMEOUT_S = 60
CLOUD_FINAL_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def cloud_image():
    try:
        return cloudimage.build()
    except cloudimage.MirrorUnreachable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def ssh_keys(tmp_path_factory):
    """Two fresh ed25519 key pairs: ``{"seed": path, "agent": path}`` (private key files)."""
    folder = tmp_path_factory.mktemp("ssh")
    keys = {}
    for name in ("seed", "agent"):
        path = folder / name
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@corral", "-f", path],
            check=True,
            timeout=30,
        )
        keys[name] = path
    return keys


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ssh(key, port: int, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "/usr/bin/ssh",
            "-i",
            str(key),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "LogLevel=ERROR",
            "-p",
            str(port),
            f"{cloudimage.LOGIN_USER}@127.0.0.1",
            command,
        ],
        capture_output=True,
        text=True,
        timeout=SSH_ATTEMPT_TIMEOUT_S,
        check=False,
    )


def seed(public_key: str) -> bytes:
    meta = f"instance-id: {uuid.uuid4()}\nlocal-hostname: {HOSTNAME}\n"
    user = (
        "#cloud-config\n"
        f"ssh_authorized_keys:\n  - {public_key}\n"
        f"runcmd:\n  - echo ran-by-cloud-init > {RUNCMD_FILE}\n"
    )
    return nocloud_iso(meta, user)


def domain_xml(conn, name: str, domain_uuid: str, volumes: dict, log: str, port: int) -> str:
    caps = ElementTree.fromstring(conn.getDomainCapabilities(None, "x86_64", None, None))
    # The NIC is QEMU's own, given through libvirt's QEMU namespace, so that it can forward a
    # host port (libvirt 9.0 has no <portForward>); its explicit PCI slot avoids the balloon's.
    return f"""
<domain type={quoteattr(caps.findtext("domain"))}
        xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{escape(name)}</name><uuid>{domain_uuid}</uuid>
  <memory unit='MiB'>{cloudimage.MEMORY_MIB}</memory><vcpu>2</vcpu>
  <os>
    <type arch='x86_64' machine={quoteattr(caps.findtext("machine"))}>hvm</type>
    <kernel>{escape(volumes["kernel"].path())}</kernel>
    <initrd>{escape(volumes["initrd"].path())}</initrd>
    <cmdline>{escape(cloudimage.KERNEL_CMDLINE)}</cmdline>
  </os>
  <features><acpi/></features>
  <devices>
    <emulator>{escape(caps.findtext("path"))}</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file={quoteattr(volumes["overlay"].path())}/><target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='cdrom'><driver name='qemu' type='raw'/>
      <source file={quoteattr(volumes["seed"].path())}/><target dev='hdc' bus='ide'/><readonly/>
    </disk>
    <serial type='pty'><log file={quoteattr(log)} append='on'/><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=hf0,hostfwd=tcp:127.0.0.1:{port}-:22'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='virtio-net-pci,netdev=hf0,addr=0x10'/>
  </qemu:commandline>
</domain>"""


class CloudGuest:
    """The image's disk (as a qcow2 overlay), kernel, initrd and a seed on a QEMU host."""

    def __init__(self, conn, image: cloudimage.CloudImage, public_key: str):
        self.conn = conn
        self.pool = conn.storagePoolLookupByName("corral")
        self.uuid = str(uuid.uuid4())
        self.port = free_port()
        prefix = self.uuid[:8]
        self.volumes = {}
        files = {
            "kernel": (f"{prefix}-vmlinuz", image.kernel.read_bytes(), "raw"),
            "initrd": (f"{prefix}-initrd", image.initrd.read_bytes(), "raw"),
            "base": (f"{prefix}-debian12.qcow2", image.disk.read_bytes(), "qcow2"),
            "seed": (f"{prefix}-seed.iso", seed(public_key), "raw"),
        }
        for role, (name, data, volume_format) in files.items():
            self.volumes[role] = upload(conn, self.pool, name, data, volume_format)
        self.volumes["overlay"] = self.pool.createXML(
            f"<volume><name>{self.uuid}.qcow2</name>"
            f"<capacity unit='bytes'>{image.manifest['disk_virtual_bytes']}</capacity>"
            "<target><format type='qcow2'/></target>"
            f"<backingStore><path>{escape(self.volumes['base'].path())}</path>"
            "<format type='qcow2'/></backingStore></volume>",
            0,
        )
        folder = ElementTree.fromstring(self.pool.XMLDesc(0)).findtext("target/path")
        self.log = f"{folder}/{self.uuid}.log"
        xml = domain_xml(conn, f"cloud-{prefix}", self.uuid, self.volumes, self.log, self.port)
        self.domain = conn.defineXML(xml)
        self.domain_type = ElementTree.fromstring(xml).get("type")

    def console(self) -> str:
        with contextlib.suppress(FileNotFoundError), open(self.log, "rb") as log:
            return log.read().decode(errors="replace")
        return ""

    def boot_until_ssh(self, key) -> float:
        """Start the guest; seconds until ``key`` first logs in over SSH."""
        started = time.monotonic()
        self.domain.create()
        attempts = []

        def logged_in():
            done = ssh(key, self.port, "true")
            attempts.append(done.stderr.strip())
            return done.returncode == 0

        wait_until(
            logged_in,
            timeout=SSH_TIMEOUT_S,
            interval=2,
            message=lambda: (
                f"No SSH login within {SSH_TIMEOUT_S} s ({self.domain_type}); last ssh error: "
                f"{attempts[-1] if attempts else ''}\nconsole:\n{self.console()[-6000:]}"
            ),
        )
        return time.monotonic() - started

    def remove(self) -> None:
        with contextlib.suppress(libvirt.libvirtError):
            if self.domain.isActive():
                self.domain.destroy()
            self.domain.undefine()
        self.pool.refresh(0)
        names = [volume.name() for volume in self.volumes.values()] + [f"{self.uuid}.log"]
        for name in names:
            with contextlib.suppress(libvirt.libvirtError):
                self.pool.storageVolLookupByName(name).delete(0)


@pytest.fixture(scope="module")
def guest(qemu_daemons, cloud_image, ssh_keys):
    """The cloud image booted once, cold, on the first QEMU host, reached over SSH."""
    conn = libvirt.open(qemu_daemons[0].uri)
    public_key = ssh_keys["seed"].with_suffix(".pub").read_text().strip()
    guest = CloudGuest(conn, cloud_image, public_key)
    try:
        guest.seconds_to_ssh = guest.boot_until_ssh(ssh_keys["seed"])
        print(
            f"\ncloud image: cold boot to first SSH login in {guest.seconds_to_ssh:.1f} s "
            f"({guest.domain_type}); image built in {cloud_image.manifest['build_seconds']} s, "
            f"disk {cloud_image.disk.stat().st_size / 2**20:.0f} MiB"
        )
        yield guest
    finally:
        guest.remove()
        conn.close()


def test_cloud_init_names_the_guest_after_the_seed(guest, ssh_keys):
    done = ssh(ssh_keys["seed"], guest.port, "hostname")

    assert (done.returncode, done.stdout.strip()) == (0, HOSTNAME), done.stderr


def test_cloud_init_runs_the_seeds_commands(guest, ssh_keys):
    # runcmd runs in cloud-init's last stage, which may end after sshd has started.
    def ran():
        done = ssh(ssh_keys["seed"], guest.port, f"cat {RUNCMD_FILE} 2>/dev/null || true")
        return done.stdout.strip()

    output = wait_until(ran, timeout=CLOUD_FINAL_TIMEOUT_S, interval=2)

    assert output == "ran-by-cloud-init"


def test_the_guest_agent_reports_the_address_the_guest_took_by_dhcp(guest):
    def address():
        found = agent_addresses(guest.domain)
        return [addr for name, addrs in found.items() if name != "lo" for addr in addrs]

    addresses = wait_until(address, timeout=60, interval=1, message="the agent gave no address")

    assert "10.0.2.15" in addresses


def test_keys_set_through_the_agent_replace_the_seeds_without_a_reboot(guest, ssh_keys):
    other_key = ssh_keys["agent"].with_suffix(".pub").read_text().strip()

    guest.domain.authorizedSSHKeysSet(cloudimage.LOGIN_USER, [other_key], 0)

    assert ssh(ssh_keys["agent"], guest.port, "true").returncode == 0
    assert ssh(ssh_keys["seed"], guest.port, "true").returncode != 0  # flags 0: replaced
    assert guest.domain.authorizedSSHKeysGet(cloudimage.LOGIN_USER, 0) == [other_key]
