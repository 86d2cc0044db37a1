"""The libvirt host driver: the only code in Corral that imports libvirt.

Everything here takes a libvirt URI and plain values (never models), so it can be tested
against ``test:///default`` in-process. Connections are cached per process and per URI,
kept alive, and reopened after a failure. Errors are raised as ``DriverError`` subclasses
with a message a person can act on. A URI outside the allowlist of ``uris`` is never opened.
"""

from hosts.driver import volumes
from hosts.driver.connection import (
    DomainNotFound,
    DriverError,
    HostUnreachable,
    NotSupported,
    UriRefused,
    close_all,
    connection,
)
from hosts.driver.domains import (
    ACTIVE_STATES,
    DomainReport,
    DomainSpec,
    HostReport,
    Hypervisor,
    define,
    domain_power_state,
    has_snapshot,
    host_report,
    migrate,
    power_off,
    resume,
    shutdown,
    snapshot_create,
    snapshot_revert,
    start,
    suspend,
    undefine,
)
from hosts.driver.events import LifecycleListener
from hosts.driver.guests import GuestDevices, GuestInfo

__all__ = [
    "ACTIVE_STATES",
    "DomainNotFound",
    "DomainReport",
    "DomainSpec",
    "DriverError",
    "GuestDevices",
    "GuestInfo",
    "HostReport",
    "Hypervisor",
    "HostUnreachable",
    "LifecycleListener",
    "NotSupported",
    "UriRefused",
    "close_all",
    "connection",
    "define",
    "domain_power_state",
    "has_snapshot",
    "host_report",
    "migrate",
    "power_off",
    "resume",
    "shutdown",
    "snapshot_create",
    "snapshot_revert",
    "start",
    "suspend",
    "undefine",
    "volumes",
]
