"""Real QEMU hosts on this machine: one session libvirtd per host, running real guests.

A kind of simulated host (``lab/simhosts.py``): the same unprivileged session daemon in its
own folder, but serving QEMU (under TCG where there is no usable KVM), with a directory storage
pool ``corral`` at ``<folder>/pool`` made through libvirt's API (or at another lab host's pool
folder: shared storage, as two hosts mounting one NFS export would have). The URI is
``qemu+unix:///session?socket=<folder>/run/libvirt/libvirt-sock``.

The folder must be short, at most 19 characters (``/tmp/cq-1``): libvirt puts each guest's
agent socket at ``<folder>/cfg/libvirt/qemu/channel/target/domain-ID-NAME/org.qemu.guest_agent.0``
and a UNIX socket path holds at most 107 bytes.

Stopping a host saves its running guests first (libvirt's managed save, as libvirt-guests does
on a real host that shuts down; lab/hoststate.py), then stops its libvirtd; starting it again
resumes them where they were. QEMU and ``virtlogd`` outlive a stopped libvirtd, so any left
over are found by ``HOME=<folder>`` in their environment and killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import libvirt

from hosts import driver
from hosts.driver.libvirt.connection import drop
from hosts.driver.libvirt.storage import ensure_storage_pool
from lab import hoststate, simhosts

MAX_DIRECTORY_LENGTH = 19
SHORT_BASE = Path("/tmp")
# Ports of the guests' VNC screens, incoming migrations and SSH servers (forwarded to the
# host's loopback): a block per host, between 20,000 and the ephemeral range (32,768 up),
# claimed by a file under PORT_CLAIMS; a third of it each.
PORT_BASE = 20000
PORTS_PER_HOST = 48
PORTS_EACH = PORTS_PER_HOST // 3
PORT_BLOCKS = (32768 - PORT_BASE) // PORTS_PER_HOST
PORT_CLAIMS = Path("/tmp/corral-qemu-ports")


@dataclass(frozen=True)
class QemuHost(simhosts.SimHost):
    # Another folder for its storage pool than its own ``pool``: the pool folder of another
    # lab host, as if both mounted one NFS export (shared storage).
    pool_path: Path | None = None
    # What its qemu.conf says of incoming migrations: the address it listens on
    # (``migration_address``; not 127.0.0.1, which libvirt refuses there: 127.0.0.2 and up are
    # this machine too) and the name it gives its peers for itself (``migration_host``). One
    # where nothing listens is a host whose own name does not lead to it from its peers.
    migration_listen: str = ""
    migration_name: str = ""

    def __post_init__(self):
        if len(str(self.directory)) > MAX_DIRECTORY_LENGTH:
            raise simhosts.SimHostError(
                f"The folder of a QEMU host must be at most {MAX_DIRECTORY_LENGTH} characters "
                f"(guest agent sockets live under it): {self.directory} is too long."
            )

    @property
    def uri(self) -> str:
        return f"qemu+unix:///session?socket={self.socket}"

    @property
    def pool_directory(self) -> Path:
        return self.pool_path or self.directory / "pool"


def new_directory() -> Path:
    """A fresh, unique folder short enough for a QEMU host (``/tmp/cq-XXXXXXXX``)."""
    return Path(tempfile.mkdtemp(prefix="cq-", dir=SHORT_BASE))


def named_directory(owner: Path) -> Path:
    """The same short folder every time for ``owner`` (``/tmp/cq-0123456789``)."""
    return SHORT_BASE / f"cq-{hashlib.sha1(str(owner).encode()).hexdigest()[:10]}"


def start(host: QemuHost, timeout: float = 30.0) -> int:
    """Start the daemon unless it runs; make sure its storage pool runs, and resume the guests
    it saved when it was stopped. Returns its pid."""
    first = PORT_BASE + PORTS_PER_HOST * claim_ports(host)
    # Its guests' screens and incoming migrations on ports no other lab host uses: daemons
    # started at once (two test runs side by side) would otherwise both pick 5900 and 49152.
    conf = (
        f"remote_display_port_min = {first}\n"
        f"remote_display_port_max = {first + PORTS_EACH - 1}\n"
        f"migration_port_min = {first + PORTS_EACH}\n"
        f"migration_port_max = {first + 2 * PORTS_EACH - 1}\n"
    )
    if host.migration_listen:
        conf += f'migration_address = "{host.migration_listen}"\n'
    if host.migration_name:
        conf += f'migration_host = "{host.migration_name}"\n'
    pid = simhosts.start_daemon(host, timeout, qemu_conf=conf)
    ensure_storage_pool(host.uri, str(host.pool_directory))
    hoststate.resume_guests(host.uri)
    return pid


def guest_ssh_ports(host: QemuHost) -> tuple[int, int]:
    """The first and last port of the host's block that its guests' SSH servers are published
    on (the Host's guest SSH port range)."""
    first = PORT_BASE + PORTS_PER_HOST * claim_ports(host) + 2 * PORTS_EACH
    return first, first + PORTS_EACH - 1


def claim_ports(host: QemuHost) -> int:
    """The block of ports this host's guests use (``PORTS_PER_HOST`` from ``PORT_BASE`` up):
    one no other lab host on this machine holds. A claim is a file naming its host's folder;
    one whose folder is gone is free again."""
    PORT_CLAIMS.mkdir(parents=True, exist_ok=True)
    first = int(hashlib.sha1(str(host.directory).encode()).hexdigest(), 16) % PORT_BLOCKS
    for step in range(PORT_BLOCKS):
        block = (first + step) % PORT_BLOCKS
        claim = PORT_CLAIMS / str(block)
        for _ in range(2):
            try:
                with open(claim, "x") as out:
                    out.write(str(host.directory))
                return block
            except FileExistsError:
                with contextlib.suppress(FileNotFoundError):
                    owner = claim.read_text()
                    if owner == str(host.directory):
                        return block
                    if owner and Path(owner).exists():
                        break  # another live host's: try the next block
                    claim.unlink()  # its host is gone: claim it again
    raise simhosts.SimHostError("Every block of ports for QEMU lab hosts is taken.")


def stop(host: QemuHost, timeout: float = 10.0) -> bool:
    """Save the host's running guests (those that cannot be saved are powered off), stop its
    daemon, kill what it left; True if it ran."""
    saved = []
    if host.pid() is not None:
        with contextlib.suppress(driver.DriverError, libvirt.libvirtError):
            saved = hoststate.suspend_guests(host.uri)
    drop(host.uri)
    stopped = simhosts.stop_daemon(host, timeout)
    kill_leftovers(host, timeout)
    if not saved:
        release_ports(host)  # saved guests resume on their ports: the block stays the host's
    return stopped


def release_ports(host: QemuHost) -> None:
    for claim in PORT_CLAIMS.glob("*") if PORT_CLAIMS.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):
            if claim.read_text() == str(host.directory):
                claim.unlink()


def leftover_pids(host: QemuHost) -> list[int]:
    """Processes started for the host (QEMU, virtlogd, libvirtd): those with ``HOME=<folder>``."""
    marker = f"HOME={host.directory}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker in environment:
            pids.append(int(entry.name))
    return pids


def kill_leftovers(host: QemuHost, timeout: float = 10.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = leftover_pids(host)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout / 2
        while pids and time.monotonic() < deadline:
            pids = leftover_pids(host)
            time.sleep(0.05)
        if not pids:
            return


def link(base: Path, name: str, host: QemuHost) -> None:
    """Record ``host`` under ``base`` (a link to its short folder), for ``discover``."""
    base.mkdir(parents=True, exist_ok=True)
    path = base / name
    if path.is_symlink() and Path(os.readlink(path)) == host.directory:
        return
    path.unlink(missing_ok=True)
    path.symlink_to(host.directory)


def discover(base: Path) -> list[QemuHost]:
    """Every QEMU host recorded under ``base`` by ``link``, running or stopped."""
    if not base.exists():
        return []
    return [
        QemuHost(name=path.name, directory=Path(os.readlink(path)))
        for path in sorted(base.iterdir())
        if path.is_symlink() and path.is_dir()
    ]
