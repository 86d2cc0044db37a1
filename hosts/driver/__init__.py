"""The host driver: what Corral asks of a host, whichever backend serves it.

Everything here takes a host's URI and plain values (never models). Each call asks the URI
allowlist (``uris``) first, then the backend serving the URI's scheme (``base.backend_for``):
libvirt's (``hosts.driver.libvirt``) for every URI no other backend claimed. A backend
implements ``HostDriver`` (``base``); errors are ``DriverError``s with a message a person can
act on. What only libvirt hosts have (storage volumes, guest files, migration with storage,
lifecycle events) is in the libvirt package itself.
"""

from hosts.driver import libvirt as _libvirt
from hosts.driver.base import (
    ACTIVE_STATES,
    STORAGE_POOL,
    DomainNotFound,
    DomainReport,
    DomainSpec,
    DriverError,
    GuestAgentUnavailable,
    GuestDevices,
    GuestInfo,
    HostDriver,
    HostReport,
    HostUnreachable,
    Hypervisor,
    NotSupported,
    PoolSpace,
    UriRefused,
    backend_for,
    register_backend,
    set_default_backend,
)

set_default_backend(_libvirt)


def has_serial_consoles(uri: str) -> bool:
    """Whether the guests of the host at ``uri`` have serial consoles Corral can open, known
    from the URI alone (no call to the host, so a request may ask): a backend says so with a
    ``has_serial_consoles(uri)`` of its own; one that does not has none."""
    try:
        backend = backend_for(uri)
    except DriverError:
        return False
    says = getattr(backend, "has_serial_consoles", None)
    return bool(says is not None and says(uri))


def host_report(uri: str, storage_pool: str = "", storage_path: str = "") -> HostReport:
    """Capacity, CPU counters and every domain's power state, in one round of calls. With
    ``storage_path``, a missing storage pool is made there; without, it reports no storage."""
    return backend_for(uri).host_report(uri, storage_pool, storage_path)


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


def migrate(source_uri: str, destination_uri: str, uuid: str) -> None:
    """Move the domain to another host of the same backend, keeping its UUID, state and
    snapshots."""
    backend = backend_for(source_uri)
    if backend_for(destination_uri) is not backend:
        raise NotSupported("A VM moves only between hosts of the same kind.", uri=destination_uri)
    backend.migrate(source_uri, destination_uri, uuid)


__all__ = [
    "ACTIVE_STATES",
    "STORAGE_POOL",
    "DomainNotFound",
    "DomainReport",
    "DomainSpec",
    "DriverError",
    "GuestAgentUnavailable",
    "GuestDevices",
    "GuestInfo",
    "HostDriver",
    "HostReport",
    "HostUnreachable",
    "Hypervisor",
    "NotSupported",
    "PoolSpace",
    "UriRefused",
    "backend_for",
    "define",
    "domain_power_state",
    "has_snapshot",
    "host_report",
    "migrate",
    "power_off",
    "register_backend",
    "resume",
    "shutdown",
    "snapshot_create",
    "snapshot_revert",
    "start",
    "suspend",
    "undefine",
]
