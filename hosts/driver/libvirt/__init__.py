"""The libvirt backend: the only code in Corral that imports libvirt.

It serves every host URI no other backend claimed (``hosts.driver.base``), with every call of
``HostDriver``: domains (``domains``), storage volumes (``volumes``, ``storage``), what reaches a
guest (``guests``, ``serial``), migration with storage (``migration``), a disk copied off its
host as an image (``exports``). Connections are cached per process and per URI, kept alive,
and reopened after a failure (``connection``); libvirt errors become ``DriverError``s with a
message a person can act on. Lifecycle events come through ``events``.
"""

from hosts.driver.libvirt.domains import (
    define,
    delete_snapshot,
    domain_power_state,
    has_snapshot,
    host_report,
    migrate,
    power_off,
    resume,
    revert_to_snapshot,
    shutdown,
    snapshot_create,
    snapshot_revert,
    start,
    suspend,
    take_snapshot,
    undefine,
)
from hosts.driver.libvirt.exports import export_disk
from hosts.driver.libvirt.guests import (
    carry_log,
    guest_info,
    recent_output,
    remove_guest_files,
    screen_port,
    set_authorized_keys,
    set_screen_password,
    write_seed,
)
from hosts.driver.libvirt.migration import migrate_with_storage, move_stopped_with_storage
from hosts.driver.libvirt.serial import has_serial_consoles, open_serial_console
from hosts.driver.libvirt.storage import sees_same_storage
from hosts.driver.libvirt.volumes import (
    create_disk,
    ensure_pool,
    keeps_disks,
    volume_path,
)
from hosts.driver.libvirt.volumes import delete as delete_volume
from hosts.driver.libvirt.volumes import upload as upload_image

__all__ = [
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
    "remove_guest_files",
    "resume",
    "screen_port",
    "sees_same_storage",
    "set_authorized_keys",
    "set_screen_password",
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
