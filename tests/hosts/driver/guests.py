"""Tiny guests on real QEMU hosts, through plain libvirt calls: what tests of real VMs share.

Volumes are uploaded into the host's ``corral`` pool through libvirt streams; the guest's disk
is a qcow2 overlay over the tiny guest's blank disk; the domain's type, emulator and machine
are those the host names (TCG here, never a hard-coded ``kvm``).
"""

import contextlib
import io
import os
import secrets
import socket
import subprocess
import time
import uuid
from pathlib import Path
from xml.etree import ElementTree
from xml.sax.saxutils import escape, quoteattr

import libvirt
import pycdlib

from lab import tinyguest
from tests.conftest import wait_until

BOOT_TIMEOUT_S = 60
POWER_OFF_TIMEOUT_S = 30
HOSTNAME = "tiny-guest"
SSH_KEYS = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx0Y29ycmFsLXRlc3Qta2V5LW9uZQ alice@example.org",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx0Y29ycmFsLXRlc3Qta2V5LXR3bw bob@example.org",
)


def upload(conn, pool, name: str, data: bytes, volume_format: str):
    """A new volume holding ``data``, sent through libvirt's upload stream."""
    volume = pool.createXML(
        f"<volume><name>{escape(name)}</name><capacity unit='bytes'>{len(data)}</capacity>"
        f"<target><format type='{volume_format}'/></target></volume>",
        0,
    )
    stream = conn.newStream(0)
    volume.upload(stream, 0, len(data), 0)
    source = io.BytesIO(data)
    stream.sendAll(lambda _stream, size, handle: handle.read(size), source)
    stream.finish()
    return volume


def overlay(pool, name: str, base):
    """A qcow2 volume recording only what the guest changes on top of ``base``."""
    return pool.createXML(
        f"<volume><name>{escape(name)}</name>"
        f"<capacity unit='bytes'>{base.info()[1]}</capacity>"
        "<target><format type='qcow2'/></target>"
        f"<backingStore><path>{escape(base.path())}</path><format type='qcow2'/>"
        "</backingStore></volume>",
        0,
    )


def seed_iso(ssh_keys=SSH_KEYS) -> bytes:
    """A NoCloud seed, as cloud-init reads it: meta-data and user-data on a volume "cidata"."""
    files = {
        "meta-data": f"instance-id: {uuid.uuid4()}\nlocal-hostname: {HOSTNAME}\n",
        "user-data": "#cloud-config\nssh_authorized_keys:\n"
        + "".join(f"  - {key}\n" for key in ssh_keys),
    }
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident="cidata")
    for name, text in files.items():
        data = text.encode()
        iso_name = "/" + name.replace("-", "").upper() + ".;1"
        iso.add_fp(io.BytesIO(data), len(data), iso_name, rr_name=name, joliet_path="/" + name)
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()


def free_port() -> int:
    """A TCP port free on the loopback address now (the kernel's pick for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def user_network(ssh_port: int | None) -> tuple[str, str]:
    """The guest's user-mode NIC: libvirt's, or with ``ssh_port`` QEMU's own, given through
    libvirt's QEMU namespace, forwarding 127.0.0.1:``ssh_port`` on this machine to the guest's
    port 22 (Debian 12's libvirt has no ``<portForward>``). Returns (device, QEMU arguments)."""
    if ssh_port is None:
        return "<interface type='user'><model type='virtio'/></interface>", ""
    arguments = (
        "-netdev",
        f"user,id=hostfwd0,hostfwd=tcp:127.0.0.1:{ssh_port}-:22",
        "-device",
        # An explicit PCI slot: libvirt's own devices (the balloon) would take the next free one.
        "virtio-net-pci,netdev=hostfwd0,addr=0x10",
    )
    return "", "<qemu:commandline>" + "".join(
        f"<qemu:arg value={quoteattr(argument)}/>" for argument in arguments
    ) + "</qemu:commandline>"


def domain_xml(
    conn, name: str, domain_uuid: str, volumes: dict, log: str, ssh_port: int | None = None
) -> str:
    caps = ElementTree.fromstring(conn.getDomainCapabilities(None, "x86_64", None, None))
    nic, qemu_arguments = user_network(ssh_port)
    return f"""
<domain type={quoteattr(caps.findtext("domain"))} xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{escape(name)}</name><uuid>{domain_uuid}</uuid>
  <memory unit='MiB'>{tinyguest.MEMORY_MIB}</memory><vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine={quoteattr(caps.findtext("machine"))}>hvm</type>
    <kernel>{escape(volumes["kernel"].path())}</kernel>
    <initrd>{escape(volumes["initrd"].path())}</initrd>
    <cmdline>console=ttyS0</cmdline>
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
    {nic}
    <serial type='pty'><log file={quoteattr(log)} append='on'/><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <graphics type='vnc' autoport='yes' listen='127.0.0.1' passwd='{secrets.token_hex(4)}'/>
  </devices>
  {qemu_arguments}
</domain>"""


class Guest:
    """One tiny guest on a QEMU host, with its volumes and its serial log."""

    def __init__(
        self,
        conn,
        pool,
        files: tinyguest.TinyGuest,
        ssh_port: int | None = None,
        ssh_keys=SSH_KEYS,
    ):
        """``ssh_port``: a port on 127.0.0.1 that reaches the guest's SSH server; ``ssh_keys``:
        the public keys its seed gives the login user."""
        self.conn, self.pool = conn, pool
        self.ssh_port = ssh_port
        self.uuid = str(uuid.uuid4())
        prefix = self.uuid[:8]
        self.volumes = {
            "kernel": upload(conn, pool, f"{prefix}-vmlinuz", files.kernel.read_bytes(), "raw"),
            "initrd": upload(conn, pool, f"{prefix}-initrd", files.initrd.read_bytes(), "raw"),
            "base": upload(conn, pool, f"{prefix}-base.qcow2", files.disk.read_bytes(), "qcow2"),
            "seed": upload(conn, pool, f"{prefix}-seed.iso", seed_iso(ssh_keys), "raw"),
        }
        self.volumes["overlay"] = overlay(pool, f"{self.uuid}.qcow2", self.volumes["base"])
        # The serial log lives in the pool's folder, so it can be read as a volume too.
        folder = ElementTree.fromstring(pool.XMLDesc(0)).findtext("target/path")
        self.log = f"{folder}/{self.uuid}.log"
        xml = domain_xml(conn, f"tiny-{prefix}", self.uuid, self.volumes, self.log, ssh_port)
        self.domain = conn.defineXML(xml)
        self.first_boot = ""

    def console(self, offset: int = 0) -> str:
        """The serial console's text from byte ``offset`` on (what every boot appended)."""
        try:
            with open(self.log, "rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def boot(self) -> str:
        """Start the guest; once it says it is up, the console text of this boot."""
        offset = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        self.domain.create()

        def booted():
            text = self.console(offset)
            return text if "corral-guest: booted" in text else None

        return wait_until(
            booted,
            timeout=BOOT_TIMEOUT_S,
            interval=0.5,
            message=lambda: "The guest did not boot; its console:\n" + self.console(offset)[-4000:],
        )

    def wait_off(self) -> None:
        wait_until(
            lambda: not self.domain.isActive(),
            timeout=POWER_OFF_TIMEOUT_S,
            interval=0.2,
            message=lambda: "The guest is still running; its console:\n" + self.console()[-2000:],
        )

    def remove(self) -> None:
        if self.domain.isActive():
            self.domain.destroy()
        self.domain.undefine()
        self.pool.refresh(0)  # the serial log becomes a volume too
        names = [volume.name() for volume in self.volumes.values()] + [f"{self.uuid}.log"]
        for name in names:
            with contextlib.suppress(libvirt.libvirtError):  # no log if it never started
                self.pool.storageVolLookupByName(name).delete(0)


def agent_addresses(domain) -> dict[str, list[str]]:
    """Addresses per interface as the guest agent reports them ({} until the agent answers)."""
    try:
        interfaces = domain.interfaceAddresses(libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT)
    except libvirt.libvirtError:
        return {}
    return {name: [a["addr"] for a in info.get("addrs") or []] for name, info in interfaces.items()}


def login(key: Path, details: dict, command: str) -> subprocess.CompletedProcess:
    """``command`` run over SSH where a VM's ``ssh`` details (the API's) say: the loopback for
    a lab host, the host's own address for a fleet host."""
    return ssh(details["port"], key, command, user=details["user"], host=details["host"])


def ssh_key(folder: Path, name: str) -> tuple[Path, str]:
    """A new ed25519 key pair in ``folder``: (its private key file, its public key line)."""
    path = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)],
        check=True,
        timeout=30,
    )
    return path, Path(f"{path}.pub").read_text().strip()


def ssh(
    port: int, key: Path, command: str, user: str = tinyguest.LOGIN_USER, host: str = "127.0.0.1"
) -> subprocess.CompletedProcess:
    """``command`` run by ``user`` over SSH to ``host``:``port``, with ``key`` only. A
    connection the guest's side drops before SSH begins (its server not listening yet: the
    host's forwarded port accepts and closes) is tried again for up to ``SSH_READY_S``, as a
    person would; an answer of the server (a refused key included) is returned at once."""
    options = {
        "StrictHostKeyChecking": "no",
        "UserKnownHostsFile": "/dev/null",
        "BatchMode": "yes",
        "IdentitiesOnly": "yes",
        "ConnectTimeout": "30",
        "LogLevel": "ERROR",
    }
    deadline = time.monotonic() + SSH_READY_S
    while True:
        done = subprocess.run(
            ["/usr/bin/ssh", "-i", str(key), "-p", str(port)]
            + [f"-o{name}={value}" for name, value in options.items()]
            + [f"{user}@{host}", command],
            capture_output=True,
            text=True,
            timeout=90,
        )
        before_ssh = done.returncode == 255 and any(s in done.stderr for s in _NOT_LISTENING)
        if not before_ssh or time.monotonic() > deadline:
            return done
        time.sleep(1)


SSH_READY_S = 30
# What ssh says when the connection ends before the server's first words.
_NOT_LISTENING = ("kex_exchange_identification", "Connection closed by", "Connection reset")


# Linux key codes (linux/input-event-codes.h) of what a test types; 42 is the left shift.
_SHIFT = 42
_PLAIN = {
    **dict(zip("1234567890", range(2, 12), strict=True)),
    **dict(zip("qwertyuiop", range(16, 26), strict=True)),
    **dict(zip("asdfghjkl", range(30, 39), strict=True)),
    **dict(zip("zxcvbnm", range(44, 51), strict=True)),
    "-": 12,
    "=": 13,
    ".": 52,
    "/": 53,
    ";": 39,
    " ": 57,
    "\n": 28,
}
KEY_CODES = {
    **{char: (code,) for char, code in _PLAIN.items()},
    **{char.upper(): (_SHIFT, code) for char, code in _PLAIN.items() if char.isalpha()},
    **{char: (_SHIFT, _PLAIN[base]) for char, base in zip("$()>", "490.", strict=True)},
}


def type_on_keyboard(domain, text: str) -> None:
    """Press the keys that type ``text`` on the guest's keyboard (what VNC sends), one by one."""
    for char in text:
        codes = list(KEY_CODES[char])
        domain.sendKey(libvirt.VIR_KEYCODE_SET_LINUX, 0, codes, len(codes), 0)


def lines(console: str) -> list[str]:
    return [line.strip() for line in console.splitlines()]


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the screen closed the connection"
        data += chunk
    return data


def _rfb_offer(address: str, port: int) -> tuple[socket.socket, set[int]]:
    sock = socket.create_connection((address, port), timeout=10)
    assert _recv_exactly(sock, 12).startswith(b"RFB 003.")
    sock.sendall(b"RFB 003.008\n")
    (count,) = _recv_exactly(sock, 1)
    return sock, set(_recv_exactly(sock, count))


def vnc_security_types(address: str, port: int) -> set[int]:
    """The RFB security types a VNC port offers any client that reaches it (1: none at all,
    2: VNC authentication)."""
    sock, offered = _rfb_offer(address, port)
    sock.close()
    return offered


def vnc_login(address: str, port: int, password: str) -> int:
    """The SecurityResult a VNC port gives VNC authentication with ``password`` (0: in)."""
    from hosts.guests import rfb

    sock, offered = _rfb_offer(address, port)
    with sock:
        assert rfb.SECURITY_VNC in offered
        sock.sendall(bytes([rfb.SECURITY_VNC]))
        sock.sendall(rfb.vnc_response(_recv_exactly(sock, 16), password))
        return int.from_bytes(_recv_exactly(sock, 4), "big")
