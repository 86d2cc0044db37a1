"""The host driver: what Corral asks of a host, whichever backend serves it.

Everything here takes a host's URI and plain values (never models), one call per thing Corral
asks of a host: domains, storage, what reaches a guest, migration. Each call asks the URI
allowlist (``uris``) first, then the backend serving the URI (``base.backend_for``): libvirt's
(``hosts.driver.libvirt``) for every URI no other backend claimed. A backend implements every
call of ``HostDriver`` (``base``), raising ``NotSupported`` for what it cannot do; errors are
``DriverError``s with a message a person can act on. Lifecycle events come from libvirt hosts
only (``LifecycleListener``); hosts of other backends are covered by the sync's interval.
"""

from datetime import datetime

from hosts.driver import libvirt as _libvirt
from hosts.driver.base import (
    ACTIVE_STATES,
    STORAGE_POOL,
    ConsoleStream,
    DiskCopy,
    DiskWriter,
    DomainNotFound,
    DomainReport,
    DomainSpec,
    DomainUsage,
    DriverError,
    GuestAgentUnavailable,
    GuestDevices,
    GuestInfo,
    HostDriver,
    HostProblem,
    HostReport,
    HostUnreachable,
    Hypervisor,
    ImageTooBig,
    NoRoom,
    NoStoragePool,
    NotSupported,
    PoolSpace,
    UriRefused,
    backend_for,
    register_backend,
    register_connection_uri,
    register_libvirt_backend,
    set_default_backend,
)
from hosts.driver.libvirt.events import LifecycleListener

set_default_backend(_libvirt)


def has_serial_consoles(uri: str) -> bool:
    """Whether the guests of the host at ``uri`` have serial consoles Corral can open, known
    from the URI alone (no call to the host, so a request may ask); False for a URI no
    backend serves."""
    try:
        backend = backend_for(uri)
    except DriverError:
        return False
    return bool(backend.has_serial_consoles(uri))


def host_report(
    uri: str,
    storage_pool: str = "",
    storage_path: str = "",
    storage_marker: str = "",
    *,
    usage: bool = False,
) -> HostReport:
    """Capacity, CPU counters and every domain's power state, in one round of calls. With
    ``storage_path``, a missing storage pool is made there; without, it reports no storage.
    With ``storage_marker`` (the host's, a UUID), the host's mark is put in its pool's folder
    and the report lists the marks found there (``storage_markers``): those of every host
    whose pool is that folder. With ``usage``, each running domain's counters for its charts
    too (``DomainReport.usage``)."""
    return backend_for(uri).host_report(
        uri, storage_pool, storage_path, storage_marker, usage=usage
    )


def domain_power_state(uri: str, uuid: str) -> str | None:
    """The raw power state of one domain, or None when the host has no such domain."""
    return backend_for(uri).domain_power_state(uri, uuid)


def define(uri: str, spec: DomainSpec) -> None:
    """Define (or redefine) the domain for ``spec``; its UUID stays the VM's UUID."""
    backend_for(uri).define(uri, spec)


def start(uri: str, uuid: str) -> None:
    """Start the domain; a running domain is left as it is."""
    backend_for(uri).start(uri, uuid)


def shutdown(uri: str, uuid: str) -> None:
    """Ask the guest to shut down (ACPI); the caller waits for the domain to stop."""
    backend_for(uri).shutdown(uri, uuid)


def power_off(uri: str, uuid: str) -> None:
    """Stop the domain at once, like pulling the plug."""
    backend_for(uri).power_off(uri, uuid)


def suspend(uri: str, uuid: str) -> None:
    backend_for(uri).suspend(uri, uuid)


def resume(uri: str, uuid: str) -> None:
    backend_for(uri).resume(uri, uuid)


def undefine(uri: str, uuid: str) -> None:
    """Remove the domain (stopping it first) with its snapshot metadata; gone already is fine."""
    backend_for(uri).undefine(uri, uuid)


def snapshot_create(uri: str, uuid: str, name: str) -> None:
    """Take snapshot ``name`` (replacing one of that name)."""
    backend_for(uri).snapshot_create(uri, uuid, name)


def has_snapshot(uri: str, uuid: str, name: str) -> bool:
    return backend_for(uri).has_snapshot(uri, uuid, name)


def snapshot_revert(uri: str, uuid: str, name: str) -> None:
    backend_for(uri).snapshot_revert(uri, uuid, name)


def take_snapshot(uri: str, uuid: str, name: str) -> int | None:
    """Take a user's snapshot ``name`` inside the VM's disk (with its memory and running state
    when it runs); what it added to the disk on the host, in bytes (None: not said)."""
    return backend_for(uri).take_snapshot(uri, uuid, name)


def revert_to_snapshot(uri: str, uuid: str, name: str, *, with_memory: bool) -> None:
    """Bring the VM back to snapshot ``name``: its disk, and with ``with_memory`` its memory and
    running state; without, it ends shut off with the snapshot's disk."""
    backend_for(uri).revert_to_snapshot(uri, uuid, name, with_memory=with_memory)


def delete_snapshot(uri: str, uuid: str, name: str) -> bool:
    """Delete snapshot ``name`` (False: the host had no such snapshot or VM)."""
    return backend_for(uri).delete_snapshot(uri, uuid, name)


def _backend_of_both(source_uri: str, destination_uri: str):
    """The backend serving both hosts; ``NotSupported`` when they are of two kinds."""
    backend = backend_for(source_uri)
    if backend_for(destination_uri) is not backend:
        raise NotSupported("A VM moves only between hosts of the same kind.", uri=destination_uri)
    return backend


# Storage: the pool holding images and VMs' disks on a host.


def keeps_disks(uri: str) -> bool:
    """Whether the host keeps images and VMs' disks in a storage pool of its own, known
    without a call to it. False for simulated hosts, which boot nothing: the disk steps of an
    operation do nothing there."""
    return backend_for(uri).keeps_disks(uri)


def ensure_pool(uri: str, pool: str, path: str = "") -> PoolSpace:
    """Make sure the storage pool ``pool`` runs, defined as a directory pool at ``path`` when
    missing (``NoStoragePool`` when missing without a path); its capacity and free space."""
    return backend_for(uri).ensure_pool(uri, pool, path)


def upload_image(
    uri: str, pool: str, pool_path: str, name: str, fmt: str, source: str, sha256: str
) -> str:
    """Copy the local file ``source`` into a new volume ``name`` of ``pool`` (format ``fmt``),
    checked by reading it back against ``sha256``; its path on the host. ``NoRoom`` when the
    pool has too little free space; a failed or mismatched copy is deleted."""
    return backend_for(uri).upload_image(uri, pool, pool_path, name, fmt, source, sha256)


def volume_path(uri: str, pool: str, name: str) -> str | None:
    """The path of the volume ``name`` of ``pool`` on the host; None when there is none."""
    return backend_for(uri).volume_path(uri, pool, name)


def create_disk(
    uri: str,
    pool: str,
    name: str,
    size: int,
    backing: tuple[str, str] | None = None,
    *,
    replace: bool = False,
) -> str:
    """The qcow2 disk ``name`` of ``size`` bytes in ``pool``, an overlay over ``backing``
    (path, format) or blank; an existing one is kept unless ``replace``. Its path."""
    return backend_for(uri).create_disk(uri, pool, name, size, backing, replace=replace)


def delete_volume(uri: str, pool: str, name: str) -> bool:
    """Delete the volume ``name`` of ``pool``; True if there was one (a host without the pool
    has none)."""
    return backend_for(uri).delete_volume(uri, pool, name)


def sees_same_storage(
    source_uri: str, source_pool: str, destination_uri: str, destination_pool: str
) -> bool:
    """Whether the two hosts' pools are one folder, as they show it now (a volume never named
    before, made through the source, is seen through the destination; then deleted)."""
    return _backend_of_both(source_uri, destination_uri).sees_same_storage(
        source_uri, source_pool, destination_uri, destination_pool
    )


def export_disk(
    uri: str, uuid: str, pool: str, volume: str, target: str, *, quiesce: bool, limit: int
) -> DiskCopy:
    """Copy the domain's disk (the volume ``volume`` of ``pool``, its overlay) into the local
    file ``target`` as one standalone qcow2, its backing chain flattened; the file's size and
    digests, hashed as it was written.

    A shut-off domain's disk is cloned on the host; a running one's is copied by its QEMU (a
    block copy), with ``quiesce`` its filesystems frozen through the guest agent for the
    instant the copy is cut (``GuestAgentUnavailable``, nothing made, when the agent does not
    answer; without, the copy is as of a crash). The copy goes through the host's pool (a
    temporary volume, deleted after) and a download stream, never the host's files. A copy
    over ``limit`` bytes is ``ImageTooBig`` and is not downloaded; ``NoRoom`` when the pool
    cannot hold it."""
    return backend_for(uri).export_disk(
        uri, uuid, pool, volume, target, quiesce=quiesce, limit=limit
    )


# Reaching a guest: its seed, console log, screen, serial console and agent.


def write_seed(uri: str, uuid: str, data: bytes, pool: str = STORAGE_POOL) -> bool:
    """Put ``data`` (a NoCloud ISO) in ``pool`` as the guest's cloud-init seed, replacing it;
    False when the host has no such pool (nothing written). A running guest reads it at its
    next boot."""
    return backend_for(uri).write_seed(uri, uuid, data, pool)


def remove_guest_files(uri: str, uuid: str, pool: str = STORAGE_POOL) -> None:
    """Delete the guest's seed and serial log from ``pool`` (and a copy of its disk that an
    image job cut short left there); missing ones are fine."""
    backend_for(uri).remove_guest_files(uri, uuid, pool)


def carry_log(
    source_uri: str, destination_uri: str, uuid: str, source_pool: str, destination_pool: str
) -> int:
    """Copy the tail of the guest's serial log to the destination's pool ahead of a migration,
    where the log goes on; the bytes copied."""
    return _backend_of_both(source_uri, destination_uri).carry_log(
        source_uri, destination_uri, uuid, source_pool, destination_pool
    )


def recent_output(uri: str, uuid: str, pool: str, size: int = 2048) -> bytes:
    """The last lines the guest wrote on its serial console (at most ``size`` bytes, from its
    first whole line): what a terminal shows when it opens. b"" when the host keeps no log."""
    return backend_for(uri).recent_output(uri, uuid, pool, size)


def guest_info(
    uri: str, wanted: dict[str, tuple[bool, int]], pool: str = STORAGE_POOL
) -> dict[str, GuestInfo]:
    """For each domain of ``wanted`` (uuid -> (has an agent, log size known)) on the host: its
    addresses and screen while it runs, and its serial log's tail when the log changed size.
    Domains the host does not have are left out."""
    return backend_for(uri).guest_info(uri, wanted, pool)


def screen_port(uri: str, uuid: str) -> int | None:
    """The VNC port of the running domain's screen on the host; None when it has no screen or
    does not run there."""
    return backend_for(uri).screen_port(uri, uuid)


def set_screen_password(uri: str, uuid: str, password: str, valid_until: datetime) -> int | None:
    """Let ``password`` (VNC authentication) open the running domain's screen until
    ``valid_until``, in place of any password it had (an open connection stays); returns the
    screen's VNC port, None when it has no screen or does not run there. A guest's screen is
    locked (a password nobody knows) from its definition on."""
    return backend_for(uri).set_screen_password(uri, uuid, password, valid_until)


def set_authorized_keys(uri: str, uuid: str, user: str, keys: list[str]) -> None:
    """Make ``keys`` the whole of ``user``'s ``authorized_keys`` in the running guest, through
    its guest agent: ``GuestAgentUnavailable`` when the agent does not answer, ``NotSupported``
    when the host cannot."""
    backend_for(uri).set_authorized_keys(uri, uuid, user, keys)


def open_serial_console(uri: str, uuid: str) -> ConsoleStream:
    """The guest's serial console, opened now on a connection of its own (taking it over from
    any other client); the caller closes it."""
    return backend_for(uri).open_serial_console(uri, uuid)


# Migration: the domain alone (hosts keeping no disks), or between hosts keeping disks in
# pools, with its disk or over storage both see. ``address``: where the destination receives
# the migration's streams, a plain host name or IP address ("": libvirt's own choice, the
# name the destination gives for itself).


def migrate(source_uri: str, destination_uri: str, uuid: str, address: str = "") -> None:
    """Move the domain to another host of the same backend, keeping its UUID, state and
    snapshots."""
    _backend_of_both(source_uri, destination_uri).migrate(
        source_uri, destination_uri, uuid, address
    )


def migrate_with_storage(
    source_uri: str,
    destination_uri: str,
    uuid: str,
    destination_boot: dict,
    address: str = "",
    copy_disk: bool = True,
) -> str:
    """Move the running domain between hosts keeping disks in pools, its paths rewritten to
    ``destination_boot`` (the boot fields of its ``DomainSpec`` on the destination). With
    ``copy_disk`` its disk goes along: the destination's overlay, boot images and seed are
    made first. Without (the hosts' pools are one folder) only its memory moves, and nothing
    is made or removed. The source overlay's path."""
    return _backend_of_both(source_uri, destination_uri).migrate_with_storage(
        source_uri, destination_uri, uuid, destination_boot, address, copy_disk
    )


def move_stopped_with_storage(
    source_uri: str, destination_uri: str, uuid: str, destination_boot: dict, address: str = ""
) -> str:
    """Move a stopped domain and its disk as ``migrate_with_storage`` does, its CPUs never
    running; it stays defined and stopped on the destination (on failure, on the source). The
    source overlay's path."""
    return _backend_of_both(source_uri, destination_uri).move_stopped_with_storage(
        source_uri, destination_uri, uuid, destination_boot, address
    )


__all__ = [
    "ACTIVE_STATES",
    "STORAGE_POOL",
    "ConsoleStream",
    "DiskCopy",
    "DiskWriter",
    "DomainNotFound",
    "DomainReport",
    "DomainSpec",
    "DomainUsage",
    "DriverError",
    "GuestAgentUnavailable",
    "GuestDevices",
    "GuestInfo",
    "HostDriver",
    "HostReport",
    "HostProblem",
    "HostUnreachable",
    "Hypervisor",
    "ImageTooBig",
    "LifecycleListener",
    "NoRoom",
    "NoStoragePool",
    "NotSupported",
    "PoolSpace",
    "UriRefused",
    "backend_for",
    "carry_log",
    "create_disk",
    "define",
    "delete_volume",
    "domain_power_state",
    "ensure_pool",
    "export_disk",
    "guest_info",
    "has_serial_consoles",
    "delete_snapshot",
    "has_snapshot",
    "host_report",
    "keeps_disks",
    "migrate",
    "migrate_with_storage",
    "move_stopped_with_storage",
    "open_serial_console",
    "power_off",
    "recent_output",
    "register_backend",
    "register_connection_uri",
    "register_libvirt_backend",
    "remove_guest_files",
    "resume",
    "screen_port",
    "sees_same_storage",
    "set_screen_password",
    "set_authorized_keys",
    "shutdown",
    "revert_to_snapshot",
    "snapshot_create",
    "snapshot_revert",
    "take_snapshot",
    "start",
    "suspend",
    "undefine",
    "upload_image",
    "volume_path",
    "write_seed",
]
