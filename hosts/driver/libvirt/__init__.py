"""The libvirt backend: the only code in Corral that imports libvirt.

It serves every host URI no other backend claimed (``hosts.driver.base``). Connections are
cached per process and per URI, kept alive, and reopened after a failure (``connection``);
libvirt errors become ``DriverError``s with a message a person can act on. Besides the
``HostDriver`` calls (``domains``) it has what only real hosts have: storage volumes, guest
devices and files, migration with storage, lifecycle events.
"""

from hosts.driver.libvirt.domains import (
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
from hosts.driver.libvirt.serial import has_serial_consoles

__all__ = [
    "define",
    "domain_power_state",
    "has_serial_consoles",
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
]
