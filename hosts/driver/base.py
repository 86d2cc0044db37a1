"""What every host driver backend shares: the interface, the data it takes and gives, its errors,
and the table that picks a backend by the URI's scheme.

A backend is a module (or any object) with the functions of ``HostDriver``. libvirt's
(``hosts.driver.libvirt``) answers every URI no other backend claimed; another backend, such as
the lab's light simulator, claims its own scheme with ``register_backend`` together with the
check its URIs must pass, and a variant of libvirt's serves the URIs of one libvirt driver
with ``register_libvirt_backend`` (the lab's, for libvirt's test driver). ``backend_for``
asks the URI allowlist (``hosts.driver.uris``) first: a URI it refuses reaches no backend.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from hosts.driver import uris

# RFB's VNC authentication reads the first 8 characters of a screen's password.
VNC_PASSWORD_LENGTH = 8

# Power states of a domain that runs (or is about to stop, or paused).
ACTIVE_STATES = frozenset({"running", "blocked", "paused", "shutdown", "pmsuspended"})
# The storage pool Corral keeps its volumes in, on every host that has one.
STORAGE_POOL = "corral"


class DriverError(Exception):
    """A host refused or failed an operation. ``code`` is stable; ``message`` is for the people
    using the VM: what failed and what it means for them, never the host's URI or its
    hypervisor's own words, which ``detail`` holds for the admins (the job's journal in the
    admin console, the server log, the host's status)."""

    code = "driver_error"

    def __init__(self, message: str, *, uri: str | None = None, detail: str = ""):
        super().__init__(message)
        self.message = message
        self.uri = uri
        self.detail = detail

    @property
    def for_admins(self) -> str:
        """The message and the host's own words."""
        return f"{self.message} ({self.detail})" if self.detail else self.message


class HostProblem:
    """Why a host cannot be used, as the host's status names it (``Host.status_reason``)."""

    UNREACHABLE = "unreachable"  # nothing answers: the network, or the host is down
    AUTH_REFUSED = "auth_refused"  # the host answered and refused Corral's login
    HOST_KEY_CHANGED = "host_key_changed"  # its SSH host key is not the one trusted for it
    HOST_KEY_UNKNOWN = "host_key_unknown"  # its SSH host key is not among the known hosts
    LIBVIRT_REFUSED = "libvirt_refused"  # reached and logged in to, but libvirt said no


class HostUnreachable(DriverError):
    """Corral could not talk to the host's libvirt: ``reason`` (a ``HostProblem``) says why,
    nothing answering (``UNREACHABLE``) or a host that answered and would not let it in."""

    code = "host_unreachable"

    def __init__(
        self,
        message: str,
        *,
        uri: str | None = None,
        detail: str = "",
        reason: str = HostProblem.UNREACHABLE,
    ):
        super().__init__(message, uri=uri, detail=detail)
        self.reason = reason


class DomainNotFound(DriverError):
    code = "domain_not_found"


class NotSupported(DriverError):
    code = "not_supported"


class GuestAgentUnavailable(DriverError):
    """The guest agent did not answer: the guest runs none, or it is not up yet."""

    code = "guest_agent_unavailable"


class NoStoragePool(DriverError):
    """The host has no such storage pool, and no path was given to make it."""

    code = "no_storage_pool"


class NoRoom(DriverError):
    """The host's storage pool has too little free space for what was to be put there."""

    code = "no_room"


class ImageTooBig(DriverError):
    """A copy of a disk is larger than an image may be (``CORRAL_IMAGE_MAX_BYTES``)."""

    code = "image_too_big"


class UriRefused(DriverError):
    """The URI is not one Corral opens (``hosts.driver.uris``): no backend was asked."""

    code = "uri_refused"


@dataclass(frozen=True)
class GuestDevices:
    """The devices that let people reach a guest: serial console (logged to the pool), the
    guest agent's channel, a VNC screen listening on ``graphics_listen``, the cloud-init seed."""

    guest_agent: bool = False
    graphics: str = "vnc"
    graphics_listen: str = "127.0.0.1"
    seed: bool = False
    storage_pool: str = STORAGE_POOL


@dataclass
class GuestInfo:
    """What a running guest shows of itself, read in one round of calls."""

    addresses: list[str] = field(default_factory=list)
    log_size: int | None = None
    log_tail: bytes | None = None  # None: unchanged since the size the caller knew
    graphics_port: int | None = None
    graphics_listen: str = ""


@dataclass(frozen=True)
class DomainSpec:
    """What a domain is made of, taken from a VM, its template and its host.

    ``name`` is the domain's name (``corral-<uuid>``), ``title`` the VM's name as people know it.
    The boot fields are empty for simulated hosts. On a real host ``disk_path`` is the VM's
    overlay volume and ``kernel``/``initrd`` the paths of image volumes; ``domain_type``,
    ``machine`` and ``emulator`` come from the host's domain capabilities when left empty.
    """

    uuid: str
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int
    networks: tuple[str, ...] = ()
    os_type: str = "linux"
    disk_path: str = ""
    kernel: str = ""
    initrd: str = ""
    cmdline: str = ""
    user_nic: bool = False
    bridge: str = ""
    # With a user-mode NIC: the port on the host that leads to the guest's port 22, listening
    # on ``ssh_forward_listen`` (the loopback of a host on Corral's machine, else every address).
    ssh_forward_port: int | None = None
    ssh_forward_listen: str = "127.0.0.1"
    domain_type: str = ""
    machine: str = ""
    emulator: str = ""
    guest: GuestDevices = GuestDevices()
    title: str = ""


@dataclass(frozen=True)
class Hypervisor:
    """How a host runs guests: ``kvm`` where it can, ``qemu`` (TCG) otherwise."""

    domain_type: str
    machine: str
    emulator: str


@dataclass(frozen=True)
class PoolSpace:
    capacity_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class DomainUsage:
    """A running domain's counters at one read, for its charts: CPU time (ns), disk bytes
    read and written and network bytes received and sent since it started, summed over its
    devices, and the memory its guest uses now. None: the host does not say."""

    cpu_time_ns: int | None = None
    memory_used_mb: int | None = None
    disk_read_bytes: int | None = None
    disk_written_bytes: int | None = None
    net_rx_bytes: int | None = None
    net_tx_bytes: int | None = None


@dataclass(frozen=True)
class DomainReport:
    """One domain as its host reports it."""

    uuid: str
    name: str
    power_state: str
    # Nanoseconds of CPU the domain has used since it started (None: the host does not say).
    cpu_time_ns: int | None = None
    # Read only when asked for (``host_report(usage=True)``), of running domains.
    usage: DomainUsage | None = None


@dataclass
class HostReport:
    """A host's capacity and every domain on it, from one round of calls started at
    ``read_at``."""

    cpus: int
    memory_mb: int
    cpu_model: str
    domains: list[DomainReport] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    read_at: datetime | None = None
    storage: PoolSpace | None = None
    hypervisor: Hypervisor | None = None
    # The host's CPU counters in nanoseconds, summed over its CPUs: (busy, total). None when
    # the host does not report them.
    cpu_times_ns: tuple[int, int] | None = None
    # The markers of the hosts whose pools are this host's pool folder (its own among them),
    # when a marker was given to put there; None when none was, or the host has no pool.
    storage_markers: frozenset[str] | None = None


@dataclass(frozen=True)
class DiskCopy:
    """A disk copied into a local file (``export_disk``): its size, its digests (hex: SHA-256,
    and Glance's MD5 and SHA-512) and its first bytes, taken as it was written."""

    size: int
    sha256: str
    md5: str
    sha512: str
    head: bytes


class DiskWriter:
    """Writes a disk copy into an open binary file, hashing it on the way (nothing is read
    back): what a backend's ``export_disk`` writes its download through."""

    HEAD_BYTES = 1024

    def __init__(self, out):
        self._out = out
        self._hashes = [hashlib.sha256(), hashlib.md5(usedforsecurity=False), hashlib.sha512()]
        self._size = 0
        self._head = b""

    def write(self, data: bytes) -> int:
        if len(self._head) < self.HEAD_BYTES:
            self._head += data[: self.HEAD_BYTES - len(self._head)]
        for digest in self._hashes:
            digest.update(data)
        self._size += len(data)
        return self._out.write(data)

    def copy(self) -> DiskCopy:
        sha256, md5, sha512 = (digest.hexdigest() for digest in self._hashes)
        return DiskCopy(self._size, sha256, md5, sha512, self._head)


class ConsoleStream(Protocol):
    """One open serial terminal of one guest (``HostDriver.open_serial_console``): ``recv``
    blocks (run it on a thread) and gives b"" once the console has ended; ``send`` may be
    called from another thread meanwhile; ``close`` ends it (a blocked ``recv`` returns)."""

    def recv(self) -> bytes: ...

    def send(self, data: bytes) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class HostDriver(Protocol):
    """What a backend does for the hosts whose URIs it serves: one call per thing Corral asks
    of a host. Every call takes the host's URI (already accepted by the allowlist) and plain
    values, and raises ``DriverError``s: ``HostUnreachable`` when the host does not answer,
    ``DomainNotFound`` when it has no such domain, ``NotSupported`` when the backend or the
    host cannot do it (a call a backend does not serve raises it, in words for the people
    using the VM). A call naming two hosts is made to the backend serving both
    (``hosts.driver`` refuses a pair of two backends)."""

    # Domains: reports, power, snapshots.

    def host_report(
        self,
        uri: str,
        storage_pool: str = "",
        storage_path: str = "",
        storage_marker: str = "",
        *,
        usage: bool = False,
    ) -> HostReport: ...

    def domain_power_state(self, uri: str, uuid: str) -> str | None: ...

    def define(self, uri: str, spec: DomainSpec) -> None: ...

    def start(self, uri: str, uuid: str) -> None: ...

    def shutdown(self, uri: str, uuid: str) -> None: ...

    def power_off(self, uri: str, uuid: str) -> None: ...

    def suspend(self, uri: str, uuid: str) -> None: ...

    def resume(self, uri: str, uuid: str) -> None: ...

    def undefine(self, uri: str, uuid: str) -> None: ...

    def snapshot_create(self, uri: str, uuid: str, name: str) -> None: ...

    def has_snapshot(self, uri: str, uuid: str, name: str) -> bool: ...

    def snapshot_revert(self, uri: str, uuid: str, name: str) -> None: ...

    def take_snapshot(self, uri: str, uuid: str, name: str) -> int | None: ...

    def revert_to_snapshot(self, uri: str, uuid: str, name: str, *, with_memory: bool) -> None: ...

    def delete_snapshot(self, uri: str, uuid: str, name: str) -> bool: ...

    # Storage: the pool holding images and VMs' disks on the host.

    def keeps_disks(self, uri: str) -> bool: ...

    def ensure_pool(self, uri: str, pool: str, path: str = "") -> PoolSpace: ...

    def upload_image(
        self, uri: str, pool: str, pool_path: str, name: str, fmt: str, source: str, sha256: str
    ) -> str: ...

    def volume_path(self, uri: str, pool: str, name: str) -> str | None: ...

    def create_disk(
        self,
        uri: str,
        pool: str,
        name: str,
        size: int,
        backing: tuple[str, str] | None = None,
        *,
        replace: bool = False,
    ) -> str: ...

    def delete_volume(self, uri: str, pool: str, name: str) -> bool: ...

    def sees_same_storage(
        self, source_uri: str, source_pool: str, destination_uri: str, destination_pool: str
    ) -> bool: ...

    def export_disk(
        self,
        uri: str,
        uuid: str,
        pool: str,
        volume: str,
        target: str,
        *,
        quiesce: bool,
        limit: int,
    ) -> DiskCopy: ...

    # Reaching a guest: its seed, console log, screen, serial console, agent.

    def write_seed(self, uri: str, uuid: str, data: bytes, pool: str = STORAGE_POOL) -> bool: ...

    def remove_guest_files(self, uri: str, uuid: str, pool: str = STORAGE_POOL) -> None: ...

    def carry_log(
        self,
        source_uri: str,
        destination_uri: str,
        uuid: str,
        source_pool: str,
        destination_pool: str,
    ) -> int: ...

    def recent_output(self, uri: str, uuid: str, pool: str, size: int = 2048) -> bytes: ...

    def guest_info(
        self, uri: str, wanted: dict[str, tuple[bool, int]], pool: str = STORAGE_POOL
    ) -> dict[str, GuestInfo]: ...

    def screen_port(self, uri: str, uuid: str) -> int | None: ...

    def set_screen_password(
        self, uri: str, uuid: str, password: str, valid_until: datetime
    ) -> int | None: ...

    def set_authorized_keys(self, uri: str, uuid: str, user: str, keys: list[str]) -> None: ...

    def has_serial_consoles(self, uri: str) -> bool: ...

    def open_serial_console(self, uri: str, uuid: str) -> ConsoleStream: ...

    # Migration: the domain alone, or with its disk.

    def migrate(
        self, source_uri: str, destination_uri: str, uuid: str, address: str = ""
    ) -> None: ...

    def migrate_with_storage(
        self,
        source_uri: str,
        destination_uri: str,
        uuid: str,
        destination_boot: dict,
        address: str = "",
        copy_disk: bool = True,
    ) -> str: ...

    def move_stopped_with_storage(
        self,
        source_uri: str,
        destination_uri: str,
        uuid: str,
        destination_boot: dict,
        address: str = "",
    ) -> str: ...


# scheme -> the backend serving it; the default backend serves every other scheme.
_BACKENDS: dict[str, HostDriver] = {}
# libvirt driver (``test``) -> the backend serving its URIs, whatever their transport, instead
# of the default backend; they stay libvirt URIs (libvirt's allowlist, not claimed).
_DRIVER_BACKENDS: dict[str, HostDriver] = {}
_default: HostDriver | None = None


def set_default_backend(backend: HostDriver) -> None:
    global _default
    _default = backend


def register_backend(scheme: str, backend: HostDriver, check: Callable[[str], None]) -> None:
    """Serve URIs of ``scheme`` (``lightsim+unix``) with ``backend``. ``check(uri)`` is the
    allowlist for them: it raises ``uris.Refusal`` with the reason a URI is refused."""
    if not isinstance(backend, HostDriver):
        raise TypeError(f"{backend!r} does not implement HostDriver")
    _BACKENDS[scheme] = backend
    uris.register_scheme(scheme, check)


def register_libvirt_backend(libvirt_driver: str, backend: HostDriver) -> None:
    """Serve the libvirt URIs of one of libvirt's drivers (``test``: ``test:///default``,
    ``test+unix://…``) with ``backend``, a variant of the libvirt backend (the lab's, for
    libvirt's test driver). Those URIs are still checked by libvirt's allowlist, opened by
    libvirt and watched for its events: only the calls ``backend`` makes differ."""
    if not isinstance(backend, HostDriver):
        raise TypeError(f"{backend!r} does not implement HostDriver")
    _DRIVER_BACKENDS[libvirt_driver] = backend
    uris.serve_driver(libvirt_driver)


def scheme(uri: str) -> str:
    return uri.split("://", 1)[0] if "://" in uri else uri.split(":", 1)[0]


def check_uri(uri: str) -> None:
    """Raise ``UriRefused`` unless the allowlist accepts ``uri``."""
    reason = uris.refusal(uri)
    if reason is not None:
        raise UriRefused(f"Corral does not open this host's URI: {reason}", uri=uri)


# How a URI is opened: the default opens it as it is; the hosts app plugs in the one that
# adds Corral's own SSH identity and the host keys it trusts (``hosts.sshtrust``).
_connection_uri: Callable[[str], str] = lambda uri: uri  # noqa: E731


def register_connection_uri(rewrite: Callable[[str], str]) -> None:
    """Open every URI as ``rewrite(uri)`` says (an accepted URI, checked again)."""
    global _connection_uri
    _connection_uri = rewrite


def connection_uri(uri: str) -> str:
    """The URI libvirt is asked to open for the host at ``uri`` (which the allowlist accepted):
    ``uri`` as the registered hook gives it back, Corral's own code (which may name Corral's
    own ssh command, a parameter no URI from outside may hold)."""
    check_uri(uri)
    return _connection_uri(uri)


def claimed(uri: str) -> bool:
    """Whether a backend other than the default one serves ``uri``."""
    return scheme(uri) in _BACKENDS


def backend_for(uri: str) -> HostDriver:
    """The backend serving ``uri``, once the allowlist accepted it."""
    check_uri(uri)
    found = scheme(uri)
    backend = _BACKENDS.get(found) or _DRIVER_BACKENDS.get(found.split("+", 1)[0], _default)
    if backend is None:
        raise NotSupported("No host driver serves this host's URI.", uri=uri, detail=uri)
    return backend
