"""Live migration between real hosts that do not share storage: the disk goes along.

The destination's overlay (backed by its own copy of the base image) and boot images are made
first; ``migrate3`` then copies only what the overlay holds (``VIR_MIGRATE_NON_SHARED_INC``),
with the domain's paths rewritten to the destination's pool in both its live and persistent
definitions. The guest's other files in the pool (the serial ``<log file>`` and the cloud-init
seed's cdrom) are renamed to the same directory as the destination's overlay: the caller uploads
the seed there first (read-only cdroms are not copied) and removes the source's overlay, seed
and log after success.
"""

from __future__ import annotations

import contextlib
import posixpath
from xml.etree import ElementTree

import libvirt

from hosts.driver.libvirt.connection import call, translate
from hosts.driver.libvirt.domains import with_forwarded_ssh_port

FLAGS = (
    libvirt.VIR_MIGRATE_LIVE
    | libvirt.VIR_MIGRATE_PERSIST_DEST
    | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
    | libvirt.VIR_MIGRATE_NON_SHARED_INC
)


def boot_paths(xml: str) -> dict[str, str]:
    """The domain's disk (vda), kernel and initrd paths, by the names ``DomainSpec`` uses."""
    root = ElementTree.fromstring(xml)
    paths = {"kernel": root.findtext("os/kernel") or "", "initrd": root.findtext("os/initrd") or ""}
    for disk in root.iterfind("devices/disk"):
        target, source = disk.find("target"), disk.find("source")
        if target is not None and target.get("dev") == "vda" and source is not None:
            paths["disk_path"] = source.get("file") or ""
    return paths


def guest_file_paths(xml: str) -> list[str]:
    """The domain's other files in its pool: cdrom sources (the seed) and serial logs."""
    root = ElementTree.fromstring(xml)
    found = [
        disk.find("source").get("file") or ""
        for disk in root.iterfind("devices/disk[@device='cdrom']")
        if disk.find("source") is not None
    ]
    found += [log.get("file") or "" for log in root.iterfind("devices/serial/log")]
    return [path for path in found if path]


def rewrite(xml: str, moves: dict[str, str]) -> str:
    """``xml`` with each source path replaced by its destination path (as XML text)."""
    for old, new in moves.items():
        if old and new and old != new:
            xml = xml.replace(f">{old}<", f">{new}<").replace(f"'{old}'", f"'{new}'")
            xml = xml.replace(f'"{old}"', f'"{new}"')
    return xml


def migrate_with_storage(
    source_uri: str, destination_uri: str, uuid: str, destination_boot: dict
) -> str:
    """Move the running domain and its disk; returns the source overlay's path."""
    source = call(source_uri, "connect for migration", lambda conn: conn, retry=True)
    destination = call(destination_uri, "connect for migration", lambda conn: conn, retry=True)
    try:
        return _migrate(source.lookupByUUIDString(uuid), destination, destination_boot)
    except libvirt.libvirtError as exc:
        others = [(destination_uri, destination)]
        raise translate(
            source_uri, exc, "migrate the VM with its disk", source, others=others
        ) from exc


def move_stopped_with_storage(
    source_uri: str, destination_uri: str, uuid: str, destination_boot: dict
) -> str:
    """Move a stopped domain and its disk: started paused on the source (its CPUs never run,
    so the guest writes nothing), migrated as a running one would be, then stopped on the
    destination, where it stays defined. Returns the source overlay's path. On failure the
    domain is stopped and still defined on the source."""
    source = call(source_uri, "connect for migration", lambda conn: conn, retry=True)
    destination = call(destination_uri, "connect for migration", lambda conn: conn, retry=True)
    try:
        dom = source.lookupByUUIDString(uuid)
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        try:
            path = _migrate(dom, destination, destination_boot)
        except libvirt.libvirtError:
            with contextlib.suppress(libvirt.libvirtError):
                dom.destroy()
            raise
        destination.lookupByUUIDString(uuid).destroy()
    except libvirt.libvirtError as exc:
        others = [(destination_uri, destination)]
        raise translate(
            source_uri, exc, "move the stopped VM with its disk", source, others=others
        ) from exc
    return path


def _migrate(dom: libvirt.virDomain, destination: libvirt.virConnect, destination_boot: dict):
    live = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE)
    inactive = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE | libvirt.VIR_DOMAIN_XML_INACTIVE)
    current = boot_paths(live)
    moves = {current[k]: destination_boot.get(k, "") for k in current}
    pool_dir = posixpath.dirname(destination_boot.get("disk_path", ""))
    if pool_dir:
        for path in guest_file_paths(live) + guest_file_paths(inactive):
            moves[path] = posixpath.join(pool_dir, posixpath.basename(path))
    live, inactive = rewrite(live, moves), rewrite(inactive, moves)
    ssh_port = destination_boot.get("ssh_forward_port")
    if ssh_port is not None:  # the destination's own port for the guest's SSH
        live = with_forwarded_ssh_port(live, ssh_port)
        inactive = with_forwarded_ssh_port(inactive, ssh_port)
    params = {
        libvirt.VIR_MIGRATE_PARAM_DEST_XML: live,
        libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: inactive,
        libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS: ["vda"],
    }
    dom.migrate3(destination, params, FLAGS)
    return current.get("disk_path", "")
