"""Fleet hosts: hosts Corral does not run itself, each on a network of its own, on this machine.

A fleet host is what a real KVM host is to Corral: a machine at its own address, reached as
``qemu+ssh://root@ADDRESS/system?keyfile=KEY``, running an sshd with a host key of its own, the
system libvirtd and virtlogd, and QEMU (under TCG). Here each is a network, mount and UTS
namespace of this machine (root only), on a bridge of its fleet:

    bridge cfl<S>           10.213.<S>.1/24, this machine's side (Corral reaches the hosts there)
    netns  cfl<S>-<i>       host i: eth0 at 10.213.<S>.<10+i>, hostname <prefix>-<i>
    link   cfl<S>v<i>       host i's cable on the bridge: set down, the host is cut off

``S`` is the fleet's slot, claimed by a file under ``CLAIMS`` so that fleets started at once
(two pytest workers, two CI runs, two checkouts) never share a name, an address or a folder.
A host's own folders are bound over /run, /var/lib/libvirt, /etc/libvirt, /var/log/libvirt and
/var/cache/libvirt in its mount namespace, and /dev/kvm is hidden, so its guests run under TCG
(``namespaces = []`` in its qemu.conf: libvirt's per-guest /dev cannot copy a hidden /dev/kvm).
Its storage pool ``corral`` is made through libvirt over SSH, as on any host; with shared
storage every host's pool is one folder mounted into all of them (as NFS would be), through
bindfs as a FUSE file system of GlusterFS's type: libvirt moves a VM that stays on its disk only
from a file system it knows to be shared, never from a plain folder.

Corral reaches them with a key of its own (``<folder>/client_key``, named by the URI's
``keyfile``). libvirt's ``ssh`` transport runs the ``ssh`` program, which takes known hosts only
from its configuration: while a fleet runs, ``/etc/ssh/ssh_config.d/corral-fleet-<S>.conf``
points ssh at the fleet's own known_hosts for its addresses only (and refuses any other key);
taking the fleet down removes it. Nothing under ~/.ssh is touched.

A fleet owned by a process (a test run: ``owner``) whose owner is gone is a leftover: the
next ``up`` takes it down, as it takes down namespaces, links and ssh settings no claim holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from hosts import sshtrust
from hosts.driver.libvirt.connection import drop
from hosts.driver.libvirt.storage import ensure_storage_pool

# Claims of slots, on tmpfs: they vanish at a reboot with the namespaces they stand for.
CLAIMS = Path("/run/corral-fleet")
SSH_CONFIG_DIR = Path("/etc/ssh/ssh_config.d")
SSH_CONFIG = Path("/etc/ssh/ssh_config")
NETWORK = "10.213"
SLOTS = 250
FIRST_HOST = 10
KERNEL_PREFIX = "cfl"  # bridges, links and namespaces: at most 15 characters
IMAGES = "/var/lib/libvirt/images"
POOL_PATH = f"{IMAGES}/corral"
SHARED_POOL_PATH = f"{IMAGES}/shared"
# The host's own folders, bound over the machine's in its mount namespace.
BOUND = {
    "run": "/run",
    "varlib": "/var/lib/libvirt",
    "etc": "/etc/libvirt",
    "log": "/var/log/libvirt",
    "cache": "/var/cache/libvirt",
}
PROGRAMS = {
    "sshd": "/usr/sbin/sshd",
    "libvirtd": "/usr/sbin/libvirtd",
    "virtlogd": "/usr/sbin/virtlogd",
    "bindfs": "/usr/bin/bindfs",
}
PACKAGES_HINT = "make fleet-host-packages (openssh-server libvirt-daemon-system iproute2 bindfs)"
_KERNEL_NAME = re.compile(rf"{KERNEL_PREFIX}(\d+)(?:-(\d+)|v(\d+))?")
_SSH_CONFIG_NAME = re.compile(r"corral-fleet-(\d+)\.conf")


class FleetHostError(Exception):
    pass


@dataclass(frozen=True)
class FleetHost:
    """Host ``index`` (from 1) of the fleet in slot ``slot`` kept in ``fleet_directory``."""

    name: str
    index: int
    slot: int
    fleet_directory: Path
    shared_storage: bool = False

    @property
    def directory(self) -> Path:
        return self.fleet_directory / self.name

    @property
    def address(self) -> str:
        return f"{NETWORK}.{self.slot}.{FIRST_HOST + self.index}"

    @property
    def namespace(self) -> str:
        return f"{KERNEL_PREFIX}{self.slot}-{self.index}"

    @property
    def link(self) -> str:
        """Its end of the cable on the fleet's bridge."""
        return f"{KERNEL_PREFIX}{self.slot}v{self.index}"

    @property
    def uri(self) -> str:
        # no_tty: ssh never asks (a password, an unknown host key) on a terminal Corral has.
        key = self.fleet_directory / "client_key"
        return f"qemu+ssh://root@{self.address}/system?keyfile={key}&no_tty=1"

    @property
    def managed_uri(self) -> str:
        """The URI an admin gives for it: reached with Corral's own key and the host key
        trusted for it in Corral (hosts/sshtrust.py), whatever ssh's configuration says."""
        return f"qemu+ssh://root@{self.address}/system"

    @property
    def host_key(self) -> str:
        """Its SSH host key (``type base64``), as an admin compares it on the host."""
        return " ".join((self.directory / "ssh_host_ed25519_key.pub").read_text().split()[:2])

    @property
    def pool_path(self) -> str:
        """Its storage pool's folder, as the host sees it."""
        return SHARED_POOL_PATH if self.shared_storage else POOL_PATH

    def pids(self) -> list[int]:
        """Every process in the host's network namespace (its daemons, guests, SSH sessions)."""
        return _namespace_pids(self.namespace)

    def cut_off(self) -> bool:
        """Its cable is pulled (``cut``)."""
        links = _ip_json("link", "show", "dev", self.link) if _link_exists(self.link) else []
        return any("UP" not in link.get("flags", []) for link in links)

    def running(self) -> bool:
        """Its sshd and libvirtd run (they wrote their pid files in its /run)."""
        return all(
            _alive(self.directory / "run" / pid_file, self.pids())
            for pid_file in ("sshd.pid", "libvirtd.pid")
        )


@dataclass(frozen=True)
class Fleet:
    directory: Path
    slot: int
    shared_storage: bool
    hosts: tuple[FleetHost, ...]

    @property
    def bridge(self) -> str:
        return f"{KERNEL_PREFIX}{self.slot}"

    @property
    def gateway(self) -> str:
        return f"{NETWORK}.{self.slot}.1"

    @property
    def client_key(self) -> Path:
        return self.directory / "client_key"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"


def default_directory() -> Path:
    """The fleet of this checkout (beside its simulated hosts)."""
    return Path(settings.CORRAL_SIMHOSTS_DIR) / "fleet"


def unavailable() -> str | None:
    """Why this machine cannot run fleet hosts at all (None: it can). Missing packages are
    not such a reason: ``up`` names them."""
    if os.geteuid() != 0:
        return "fleet hosts need root (network namespaces, a bridge, mounts)"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "fleet hosts need unshare and ip (util-linux, iproute2)"
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "--uts", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"this machine gives no network and mount namespaces: {probe.stderr.strip()}"
    return None


def missing() -> list[str]:
    """What a fleet host needs that this machine lacks, in words."""
    lacking = [path for path in PROGRAMS.values() if not os.access(path, os.X_OK)]
    lacking += [name for name in ("ssh", "ssh-keygen") if shutil.which(name) is None]
    if not Path("/etc/libvirt/qemu.conf").exists():
        lacking.append("/etc/libvirt/qemu.conf")
    try:
        pwd.getpwnam("libvirt-qemu")
    except KeyError:
        lacking.append("the user libvirt-qemu")
    if SSH_CONFIG.exists() and "ssh_config.d/*.conf" not in SSH_CONFIG.read_text():
        lacking.append(f"an Include of {SSH_CONFIG_DIR}/*.conf in {SSH_CONFIG}")
    return lacking


# -- up, down, list ----------------------------------------------------------------------------


def up(
    count: int,
    shared_storage: bool = False,
    *,
    directory: Path | None = None,
    prefix: str = "fleet",
    owner: int | None = None,
    timeout: float = 60.0,
) -> Fleet:
    """Hosts 1 to ``count`` of the fleet kept in ``directory`` running, each with its storage
    pool; returns the fleet. Idempotent: running hosts are kept, missing or dead ones started.
    ``owner``: the pid of the process whose end makes the fleet a leftover (None: it lasts
    until ``down``)."""
    if count < 1:
        raise FleetHostError("A fleet has at least 1 host.")
    reason = unavailable()
    if reason:
        raise FleetHostError(f"Fleet hosts cannot run here: {reason}.")
    lacking = missing()
    if lacking:
        raise FleetHostError(f"Fleet hosts need {', '.join(lacking)}: {PACKAGES_HINT}.")
    directory = Path(directory or default_directory())
    with _claims_locked():
        _remove_leftovers()
        fleet = discover(directory)
        created = fleet is None
        if fleet is None:
            slot = _claim_slot(directory, owner)
            fleet = Fleet(directory, slot, shared_storage, ())
        elif fleet.shared_storage != shared_storage:
            raise FleetHostError(
                f"The fleet in {directory} runs {'with' if fleet.shared_storage else 'without'} "
                "shared storage: take it down first."
            )
    hosts = tuple(
        FleetHost(f"{prefix}-{i}", i, fleet.slot, directory, shared_storage)
        for i in range(1, max(count, len(fleet.hosts)) + 1)
    )
    if fleet.hosts:
        hosts = fleet.hosts + hosts[len(fleet.hosts) :]
    fleet = Fleet(directory, fleet.slot, shared_storage, hosts)
    try:
        _record(fleet)
        _prepare(fleet)
        anchors = {host: _start(fleet, host) for host in hosts if not host.running()}
        deadline = time.monotonic() + timeout
        for host, anchor in anchors.items():
            _wait_ready(host, anchor, deadline)
        _write_known_hosts(fleet)
        for host in hosts:
            ensure_storage_pool(host.uri, host.pool_path)
    except BaseException:
        if created:
            _release(fleet)
        raise
    return fleet


def down(directory: Path | None = None) -> list[str]:
    """Take the fleet kept in ``directory`` down: its hosts' processes killed, namespaces,
    links, bridge and ssh settings removed, its folder deleted. The names of its hosts."""
    directory = Path(directory or default_directory())
    fleet = discover(directory)
    if fleet is None:
        return []
    _release(fleet)
    return [host.name for host in fleet.hosts]


def _release(fleet: Fleet) -> None:
    for host in fleet.hosts:
        drop(host.uri)
    with _claims_locked():
        _tear_down(fleet.slot)
        _remove_folder(fleet.directory)
        (CLAIMS / f"{fleet.slot}.json").unlink(missing_ok=True)


def discover(directory: Path | None = None) -> Fleet | None:
    """The fleet kept in ``directory`` as recorded there (running or not), or None."""
    directory = Path(directory or default_directory())
    try:
        recorded = json.loads((directory / "fleet.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    slot, shared = recorded["slot"], recorded["shared_storage"]
    hosts = tuple(
        FleetHost(name, index, slot, directory, shared)
        for index, name in enumerate(recorded["hosts"], start=1)
    )
    return Fleet(directory, slot, shared, hosts)


def cut(host: FleetHost) -> None:
    """Pull the host's cable: nothing reaches it nor leaves it until ``rejoin``."""
    _ip("link", "set", host.link, "down")


def rejoin(host: FleetHost) -> None:
    _ip("link", "set", host.link, "up")


# -- making a fleet ----------------------------------------------------------------------------


def _prepare(fleet: Fleet) -> None:
    """The fleet's folder, Corral's key, its bridge and the ssh settings for its addresses."""
    fleet.directory.mkdir(parents=True, exist_ok=True)
    fleet.directory.chmod(0o755)
    _keygen(fleet.client_key, "corral-fleet")
    if not _link_exists(fleet.bridge):
        _ip("link", "add", fleet.bridge, "type", "bridge")
        _ip("addr", "add", f"{fleet.gateway}/24", "dev", fleet.bridge)
    _ip("link", "set", fleet.bridge, "up")
    config = (
        f"# Corral's lab fleet hosts kept in {fleet.directory} (lab/fleethosts.py): their\n"
        "# host keys, and Corral's key only. Removed when the fleet is taken down.\n"
        f"Host {NETWORK}.{fleet.slot}.*\n"
        f"    UserKnownHostsFile {fleet.known_hosts}\n"
        "    GlobalKnownHostsFile /dev/null\n"
        "    StrictHostKeyChecking yes\n"
        "    IdentitiesOnly yes\n"
        "    BatchMode yes\n"
        "    ConnectTimeout 5\n"
        # A host gone (cut off, taken down) ends its connections, not only Corral's own.
        "    ServerAliveInterval 5\n"
        "    ServerAliveCountMax 3\n"
    )
    _write_atomically(_ssh_config(fleet.slot), config)


def _record(fleet: Fleet) -> None:
    fleet.directory.mkdir(parents=True, exist_ok=True)
    recorded = {
        "slot": fleet.slot,
        "shared_storage": fleet.shared_storage,
        "hosts": [host.name for host in fleet.hosts],
    }
    _write_atomically(fleet.directory / "fleet.json", json.dumps(recorded))


def _start(fleet: Fleet, host: FleetHost) -> subprocess.Popen:
    """Start the host (its namespaces, sshd, virtlogd and libvirtd); the process that holds
    its namespaces."""
    root = host.directory
    _kill(host.namespace)  # what is left of an earlier start
    shutil.rmtree(root / "run", ignore_errors=True)  # as a reboot empties /run
    for folder in ("run/sshd", "run/libvirt", "varlib/images", "log", "cache"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for folder in (root, root / "run", root / "run/sshd", root / "varlib"):
        folder.chmod(0o755)
    if not (root / "etc").exists():
        _write_libvirt_config(host)
    (root / "nokvm").touch()
    _keygen(root / "ssh_host_ed25519_key", host.name)
    # The fleet's key (the lab's own URIs) and Corral's (a host added as an admin adds one).
    authorized = Path(f"{fleet.client_key}.pub").read_text().strip()
    (root / "authorized_keys").write_text(f"{authorized}\n{sshtrust.identity().public_key}\n")
    (root / "sshd_config").write_text(
        f"ListenAddress {host.address}\n"
        f"HostKey {root}/ssh_host_ed25519_key\n"
        "PidFile /run/sshd.pid\n"
        f"AuthorizedKeysFile {root}/authorized_keys\n"
        # Its folder is under /tmp (world-writable), which sshd would refuse for a key file.
        "StrictModes no\n"
        "UsePAM no\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "PrintMotd no\n"
    )
    shared = fleet.directory / "shared"
    if host.shared_storage:
        shared.mkdir(exist_ok=True)
        shared.chmod(0o755)
        (root / "varlib/images/shared").mkdir(exist_ok=True)
    if host.namespace not in namespaces():
        _ip("netns", "add", host.namespace)
    if not _link_exists(host.link):
        peer = ("peer", "name", "eth0", "netns", host.namespace)
        _ip("link", "add", host.link, "type", "veth", *peer)
        _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
    _ip("link", "set", host.link, "master", fleet.bridge, "up")
    _ip("-n", host.namespace, "link", "set", "eth0", "up")
    _ip("-n", host.namespace, "link", "set", "lo", "up")
    mounts = [f"mount --bind {shlex.quote(str(root / own))} {path}" for own, path in BOUND.items()]
    if Path("/dev/kvm").exists():
        mounts.append(f"mount --bind {shlex.quote(str(root / 'nokvm'))} /dev/kvm")
    if host.shared_storage:
        # A FUSE mirror of the folder, of the type GlusterFS mounts have: libvirt migrates a
        # VM on its disk only from storage it knows to be shared (NFS, GlusterFS, Ceph…),
        # never from a plain folder, whoever else sees it.
        mounts.append(
            f"bindfs -o subtype=glusterfs,allow_other {shlex.quote(str(shared))} {SHARED_POOL_PATH}"
        )
    script = "; ".join(
        [
            "set -e",
            f"hostname {shlex.quote(host.name)}",
            *mounts,
            f"{PROGRAMS['sshd']} -f {shlex.quote(str(root / 'sshd_config'))}",
            f"{PROGRAMS['virtlogd']} -d",
            f"{PROGRAMS['libvirtd']} -d",
            "exec sleep infinity",
        ]
    )
    # Its own mount and UTS namespaces inside its network namespace; the mounts stay in there.
    unshare = ("unshare", "--mount", "--uts", "--propagation", "private", "--")
    log = open(root / "host.log", "ab")  # noqa: SIM115 (owned by the process)
    try:
        return subprocess.Popen(
            ["ip", "netns", "exec", host.namespace, *unshare, "/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
        )
    finally:
        log.close()


def _write_libvirt_config(host: FleetHost) -> None:
    """The host's /etc/libvirt: the machine's, with a host UUID of its own (libvirt would read
    the machine's, and refuse to migrate between two hosts of one UUID), its logs in its own
    folder, no libvirt networks (its guests use user-mode NICs, as on a session daemon), and
    QEMU without /dev namespaces, offering migrations at its own address."""
    etc = host.directory / "etc"
    shutil.copytree("/etc/libvirt", etc, symlinks=True)
    networks = etc / "qemu" / "networks"
    shutil.rmtree(networks, ignore_errors=True)
    (networks / "autostart").mkdir(parents=True)
    with open(etc / "libvirtd.conf", "a") as conf:
        conf.write(
            f'\nhost_uuid = "{uuid.uuid4()}"\n'
            'log_outputs = "3:file:/var/log/libvirt/libvirtd.log"\n'
        )
    with open(etc / "virtlogd.conf", "a") as conf:
        conf.write('\nlog_outputs = "3:file:/var/log/libvirt/virtlogd.log"\n')
    with open(etc / "qemu.conf", "a") as conf:
        conf.write(f'\nnamespaces = []\nmigration_host = "{host.address}"\n')


def _wait_ready(host: FleetHost, anchor: subprocess.Popen, deadline: float) -> None:
    """Until the host's libvirtd has its socket and its sshd answers on its address."""
    socket_path = host.directory / "run" / "libvirt" / "libvirt-sock"
    while True:
        if socket_path.exists() and _answers(host.address, 22):
            return
        if anchor.poll() is not None:
            raise FleetHostError(
                f"{host.name} stopped as it started (exit {anchor.returncode}): "
                f"{_tail(host.directory / 'host.log')}"
            )
        if time.monotonic() > deadline:
            raise FleetHostError(
                f"{host.name} was not ready in time: {_tail(host.directory / 'host.log')} "
                f"{_tail(host.directory / 'log' / 'libvirtd.log')}"
            )
        time.sleep(0.1)


def _write_known_hosts(fleet: Fleet) -> None:
    lines = []
    for host in fleet.hosts:
        key_type, key, *_ = (host.directory / "ssh_host_ed25519_key.pub").read_text().split()
        lines.append(f"{host.address} {key_type} {key}\n")
    _write_atomically(fleet.known_hosts, "".join(lines))


# -- slots, leftovers, taking down -------------------------------------------------------------


@contextlib.contextmanager
def _claims_locked() -> Iterator[None]:
    """One process at a time claims, frees and clears slots (on this machine)."""
    CLAIMS.mkdir(mode=0o755, parents=True, exist_ok=True)
    with open(CLAIMS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _claim_slot(directory: Path, owner: int | None) -> int:
    """A slot no other fleet holds, whose subnet this machine does not use; the same one for
    ``directory`` each time it is free."""
    used = _used_networks()
    first = int(hashlib.sha1(str(directory).encode()).hexdigest(), 16) % SLOTS
    for step in range(SLOTS):
        slot = (first + step) % SLOTS
        subnet = ipaddress.ip_network(f"{NETWORK}.{slot}.0/24")
        claim = CLAIMS / f"{slot}.json"
        if claim.exists() or any(subnet.overlaps(net) for net in used):
            continue
        if _link_exists(f"{KERNEL_PREFIX}{slot}"):
            continue
        record = {"directory": str(directory), "owner": owner, "started": _start_time(owner)}
        with open(claim, "x") as out:
            out.write(json.dumps(record))
        return slot
    raise FleetHostError("Every slot for lab fleets on this machine is taken.")


def remove_leftovers() -> list[int]:
    """Take down the fleets whose owner is gone, and what no claim holds; their slots."""
    with _claims_locked():
        return _remove_leftovers()


def _remove_leftovers() -> list[int]:
    claimed = {}
    for claim in CLAIMS.glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            claimed[int(claim.stem)] = json.loads(claim.read_text())
    removed = []
    for slot, record in sorted(claimed.items()):
        if _claim_live(record):
            continue
        _tear_down(slot)
        if record.get("owner") is not None:  # a test run's own folder
            _remove_folder(Path(record["directory"]))
        (CLAIMS / f"{slot}.json").unlink(missing_ok=True)
        removed.append(slot)
    orphans = {slot for slot in _kernel_slots() if slot not in claimed}
    for slot in sorted(orphans):
        _tear_down(slot)
        removed.append(slot)
    return removed


def _claim_live(record: dict) -> bool:
    """A fleet with an owner lives as long as its owner; one without, while its folder does."""
    owner = record.get("owner")
    if owner is None:
        return (Path(record.get("directory", "")) / "fleet.json").exists()
    started = _start_time(owner)
    return started is not None and started == record.get("started")


def _kernel_slots() -> set[int]:
    """Slots that have a namespace, a link or ssh settings on this machine."""
    names = namespaces() + [link["ifname"] for link in _ip_json("link", "show")]
    slots = {int(match[1]) for name in names if (match := _KERNEL_NAME.fullmatch(name))}
    for config in SSH_CONFIG_DIR.glob("corral-fleet-*.conf") if SSH_CONFIG_DIR.is_dir() else ():
        if match := _SSH_CONFIG_NAME.fullmatch(config.name):
            slots.add(int(match[1]))
    return slots


def _tear_down(slot: int) -> None:
    """Everything of slot ``slot`` on this machine gone: its hosts' processes, namespaces,
    links, bridge and ssh settings."""
    for namespace in namespaces():
        match = _KERNEL_NAME.fullmatch(namespace)
        if match and int(match[1]) == slot and match[2]:
            _kill(namespace)
            _ip("netns", "delete", namespace, check=False)
    for link in _ip_json("link", "show"):
        match = _KERNEL_NAME.fullmatch(link["ifname"])
        if match and int(match[1]) == slot:
            _ip("link", "delete", link["ifname"], check=False)
    _ssh_config(slot).unlink(missing_ok=True)


def _remove_folder(directory: Path) -> None:
    """A fleet's folder, only if it is one (it records a fleet)."""
    if (directory / "fleet.json").exists():
        shutil.rmtree(directory, ignore_errors=True)


def _kill(namespace: str, timeout: float = 10.0) -> None:
    """Kill every process in the network namespace (QEMU with the rest: the host vanishes)."""
    deadline = time.monotonic() + timeout
    while pids := _namespace_pids(namespace):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # our own child: reaped
        if time.monotonic() > deadline:
            raise FleetHostError(f"Processes of {namespace} outlived SIGKILL: {pids}")
        time.sleep(0.05)


# -- small helpers -----------------------------------------------------------------------------


def _keygen(path: Path, comment: str) -> None:
    """An ed25519 key without passphrase at ``path`` (kept if there)."""
    if not path.exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def _ssh_config(slot: int) -> Path:
    return SSH_CONFIG_DIR / f"corral-fleet-{slot}.conf"


def _run(command: list[str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise FleetHostError(f"{shlex.join(command)} failed: {done.stderr.strip()}")
    return done


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["ip", *args], check=check)


def _ip_json(*args: str) -> list[dict]:
    return json.loads(_ip("-j", *args).stdout or "[]")


def _link_exists(name: str) -> bool:
    return _ip("link", "show", name, check=False).returncode == 0


def namespaces() -> list[str]:
    """The named network namespaces on this machine (``ip netns``)."""
    return [entry.name for entry in Path("/run/netns").glob("*")]


def _namespace_pids(namespace: str) -> list[int]:
    try:
        wanted = os.stat(Path("/run/netns") / namespace)
    except FileNotFoundError:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found = os.stat(entry / "ns" / "net")
        except OSError:  # gone meanwhile, or a zombie
            continue
        if (found.st_ino, found.st_dev) == (wanted.st_ino, wanted.st_dev):
            pids.append(int(entry.name))
    return pids


def _used_networks() -> list[ipaddress.IPv4Network]:
    used = []
    for route in _ip_json("-4", "route", "show", "table", "all"):
        with contextlib.suppress(ValueError):
            if route.get("dst", "default") != "default":
                used.append(ipaddress.ip_network(route["dst"], strict=False))
    return used


def _start_time(pid: int | None) -> int | None:
    """When process ``pid`` started (clock ticks since boot), telling it from a later process
    given the same pid; None when it is gone."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _alive(pid_file: Path, pids: list[int]) -> bool:
    try:
        return int(pid_file.read_text().strip()) in pids
    except (FileNotFoundError, ValueError):
        return False


def _answers(address: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=0.5):
        return True
    return False


def _tail(path: Path, size: int = 600) -> str:
    try:
        return path.read_bytes()[-size:].decode(errors="replace").strip()
    except FileNotFoundError:
        return ""


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)
