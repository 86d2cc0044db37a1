"""libvirt's backend for hosts served by libvirt's test driver (the lab's simulated hosts).

Every call is the libvirt backend's, but for what the test driver lacks: it has no domain
capabilities (a domain is of type ``test``, the report names no hypervisor), no storage Corral
uses (no disks, images or pool space: the disk steps of an operation do nothing), no serial
consoles, and it cannot migrate, so migration is emulated: the domain (its snapshots
redefined) is defined on the destination and started there in the same state, then stopped
and undefined on the source, keeping its UUID.
"""

from __future__ import annotations

from dataclasses import replace

import libvirt

from hosts.driver.base import ACTIVE_STATES, DomainSpec, DriverError, HostReport
from hosts.driver.libvirt import (
    carry_log,
    create_disk,
    delete_snapshot,
    delete_volume,
    domain_power_state,
    domains,
    ensure_pool,
    guest_info,
    has_snapshot,
    migrate_with_storage,
    move_stopped_with_storage,
    open_serial_console,
    power_off,
    recent_output,
    remove_guest_files,
    resume,
    revert_to_snapshot,
    screen_port,
    sees_same_storage,
    set_authorized_keys,
    set_screen_password,
    shutdown,
    snapshot_create,
    snapshot_revert,
    start,
    suspend,
    take_snapshot,
    undefine,
    upload_image,
    volume_path,
    write_seed,
)
from hosts.driver.libvirt.connection import call, translate

LIBVIRT_DRIVER = "test"


def host_report(
    uri: str, storage_pool: str = "", storage_path: str = "", storage_marker: str = ""
) -> HostReport:
    """The libvirt report, without storage or hypervisor (the test driver has neither)."""
    return domains.host_report(uri, capabilities=False)


def define(uri: str, spec: DomainSpec) -> None:
    """Define the domain as the libvirt backend does, of type ``test`` unless told."""
    domains.define(uri, spec if spec.domain_type else replace(spec, domain_type="test"))


def keeps_disks(uri: str) -> bool:
    """Simulated hosts keep no disks: they boot nothing."""
    return False


def has_serial_consoles(uri: str) -> bool:
    """The test driver opens no consoles."""
    return False


def migrate(source_uri: str, destination_uri: str, uuid: str, address: str = "") -> None:
    """Move the domain to another simulated host, keeping its UUID, state and snapshots (an
    emulation: the test driver cannot migrate, so there is no stream to send to ``address``)."""
    source = call(source_uri, "connect for migration", lambda conn: conn, retry=True)
    destination = call(destination_uri, "connect for migration", lambda conn: conn, retry=True)
    try:
        _emulate_migration(destination, source.lookupByUUIDString(uuid))
    except libvirt.libvirtError as exc:
        raise translate(
            source_uri, exc, "migrate the VM", source, others=[(destination_uri, destination)]
        ) from exc


def _emulate_migration(destination: libvirt.virConnect, dom: libvirt.virDomain) -> None:
    state = domains.POWER_STATES.get(dom.state()[0], "nostate")
    try:
        destination.lookupByUUIDString(dom.UUIDString())
        raise DriverError("The destination host already has this VM.")
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise
    moved = destination.defineXML(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
    for snapshot in dom.listAllSnapshots():
        moved.snapshotCreateXML(snapshot.getXMLDesc(0), libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE)
    if state in ACTIVE_STATES:
        moved.create()
        if state == "paused":
            moved.suspend()
        dom.destroy()
    dom.undefineFlags(domains.UNDEFINE_FLAGS)


__all__ = [
    "LIBVIRT_DRIVER",
    "carry_log",
    "create_disk",
    "define",
    "delete_snapshot",
    "delete_volume",
    "domain_power_state",
    "ensure_pool",
    "guest_info",
    "has_serial_consoles",
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
    "revert_to_snapshot",
    "screen_port",
    "sees_same_storage",
    "set_authorized_keys",
    "set_screen_password",
    "shutdown",
    "snapshot_create",
    "snapshot_revert",
    "start",
    "suspend",
    "take_snapshot",
    "undefine",
    "upload_image",
    "volume_path",
    "write_seed",
]
