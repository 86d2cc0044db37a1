"""libvirt's backend for hosts served by libvirt's test driver (the lab's simulated hosts).

Every call is the libvirt backend's, but for what the test driver lacks: it has no domain
capabilities (a domain is of type ``test``, the report names no hypervisor), no storage Corral
uses (no disks, images or pool space: the disk steps of an operation do nothing), no serial
consoles, and it cannot migrate, so migration is emulated: the domain (its snapshots
redefined) is defined on the destination and started there in the same state, then stopped
and undefined on the source, keeping its UUID. With no disk, a VM's disk is blank: an image
made of it is a blank qcow2 the size of the VM's disk.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import replace
from xml.etree import ElementTree

import libvirt

from hosts.driver.base import (
    ACTIVE_STATES,
    DiskCopy,
    DiskWriter,
    DomainSpec,
    DriverError,
    HostReport,
    ImageTooBig,
)
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
from hosts.driver.libvirt.domains import CORRAL_XMLNS

LIBVIRT_DRIVER = "test"


def host_report(
    uri: str,
    storage_pool: str = "",
    storage_path: str = "",
    storage_marker: str = "",
    *,
    usage: bool = False,
) -> HostReport:
    """The libvirt report, without storage or hypervisor (the test driver has neither)."""
    return domains.host_report(uri, capabilities=False, usage=usage)


def define(uri: str, spec: DomainSpec) -> None:
    """Define the domain as the libvirt backend does, of type ``test`` unless told."""
    domains.define(uri, spec if spec.domain_type else replace(spec, domain_type="test"))


def keeps_disks(uri: str) -> bool:
    """Simulated hosts keep no disks: they boot nothing."""
    return False


def export_disk(
    uri: str, uuid: str, pool: str, volume: str, target: str, *, quiesce: bool, limit: int
) -> DiskCopy:
    """The simulated VM's disk as an image: a blank qcow2 of its disk's size (the ``disk_gb``
    its definition records), written to ``target``; a running domain is quiesced through the
    test driver's own agent calls (``fsFreeze``, ``fsThaw``), which always answer."""

    def read(conn: libvirt.virConnect) -> int:
        dom = conn.lookupByUUIDString(uuid)
        if quiesce and dom.isActive():
            dom.fsFreeze(None, 0)
            dom.fsThaw(None, 0)
        metadata = ElementTree.fromstring(dom.XMLDesc(0)).find(f"metadata/{{{CORRAL_XMLNS}}}vm")
        return int(metadata.get("disk_gb", "1")) if metadata is not None else 1

    disk_gb = call(uri, "make an image of the VM's disk", read)
    with tempfile.TemporaryDirectory(prefix="corral-blank-") as folder:
        blank = os.path.join(folder, "disk.qcow2")
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", blank, f"{disk_gb}G"], check=True
        )
        size = os.path.getsize(blank)
        if size > limit:
            raise ImageTooBig(
                f"The VM's disk makes an image of {size} bytes, over the limit of {limit}."
            )
        with open(blank, "rb") as source, open(target, "wb") as out:
            writer = DiskWriter(out)
            writer.write(source.read())
    return writer.copy()


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
    "export_disk",
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
