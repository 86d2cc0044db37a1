"""Live migration between real hosts keeping disks in storage pools: with the disk, or over
storage both hosts see.

Between hosts that do not share storage the disk goes along: the destination's overlay (backed
by its own copy of the base image) and boot images are made first; ``migrate3`` then copies
only what the overlay holds (``VIR_MIGRATE_NON_SHARED_INC``). Between hosts whose pools are one
folder (``copy_disk=False``) only the memory moves: nothing is made on the destination and
nothing removed from the source, the disk stays the file it is. Either way the domain's paths
are rewritten to the destination's pool in its live and persistent definitions (the same
folder may be mounted elsewhere there), the guest's other files in the pool (the serial ``<log
file>`` and the cloud-init seed's cdrom) too: without shared storage the caller uploads the
seed there first (read-only cdroms are not copied) and removes the source's overlay, seed and
log after success.
"""

from __future__ import annotations

import contextlib
import posixpath
from xml.etree import ElementTree

import libvirt

from hosts.driver import uris
from hosts.driver.libvirt.connection import call, translate
from hosts.driver.libvirt.domains import migration_params, with_forwarded_ssh_port

FLAGS = (
    libvirt.VIR_MIGRATE_LIVE
    | libvirt.VIR_MIGRATE_PERSIST_DEST
    | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
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
    source_uri: str,
    destination_uri: str,
    uuid: str,
    destination_boot: dict,
    address: str = "",
    copy_disk: bool = True,
) -> str:
    """Move the running domain, with its disk unless ``copy_disk`` is false (the hosts' pools
    are one folder); its stream goes to ``address``. Returns the source overlay's path."""
    source = call(source_uri, "connect for migration", lambda conn: conn, retry=True)
    destination = call(destination_uri, "connect for migration", lambda conn: conn, retry=True)
    try:
        return _migrate(
            source.lookupByUUIDString(uuid),
            destination,
            destination_boot,
            address=address,
            copy_disk=copy_disk,
            same_machine=_same_machine(source_uri, destination_uri),
        )
    except libvirt.libvirtError as exc:
        what = "migrate the VM with its disk" if copy_disk else "migrate the VM"
        others = [(destination_uri, destination)]
        raise translate(source_uri, exc, what, source, others=others) from exc


def move_stopped_with_storage(
    source_uri: str, destination_uri: str, uuid: str, destination_boot: dict, address: str = ""
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
            path = _migrate(dom, destination, destination_boot, address=address)
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


def _same_machine(source_uri: str, destination_uri: str) -> bool:
    """Both hosts are daemons on Corral's own machine (the lab's): they see one file system
    through one page cache."""
    return uris.is_local(source_uri) and uris.is_local(destination_uri)


def _migrate(
    dom: libvirt.virDomain,
    destination: libvirt.virConnect,
    destination_boot: dict,
    *,
    address: str = "",
    copy_disk: bool = True,
    same_machine: bool = False,
) -> str:
    # With its secrets: without them the destination's screen would need no password.
    xml_flags = libvirt.VIR_DOMAIN_XML_MIGRATABLE | libvirt.VIR_DOMAIN_XML_SECURE
    live = dom.XMLDesc(xml_flags)
    inactive = dom.XMLDesc(xml_flags | libvirt.VIR_DOMAIN_XML_INACTIVE)
    current = boot_paths(live)
    moves = {current[k]: destination_boot.get(k, "") for k in current}
    pool_dir = posixpath.dirname(destination_boot.get("disk_path", ""))
    if pool_dir:
        for path in guest_file_paths(live) + guest_file_paths(inactive):
            moves[path] = posixpath.join(pool_dir, posixpath.basename(path))
    live, inactive = rewrite(live, moves), rewrite(inactive, moves)
    ssh_port = destination_boot.get("ssh_forward_port")
    if ssh_port is not None:  # the destination's own port (and address) for the guest's SSH
        listen = destination_boot.get("ssh_forward_listen", "127.0.0.1")
        live = with_forwarded_ssh_port(live, ssh_port, listen)
        inactive = with_forwarded_ssh_port(inactive, ssh_port, listen)
    params = {
        libvirt.VIR_MIGRATE_PARAM_DEST_XML: live,
        libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: inactive,
        **migration_params(address),
    }
    flags = FLAGS
    if copy_disk:
        params[libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS] = ["vda"]
        flags |= libvirt.VIR_MIGRATE_NON_SHARED_INC
    elif same_machine:
        # libvirt lets a disk stay where it is only on a network or cluster file system (NFS,
        # GFS2, Ceph...), where it is safe from the two hosts' caches; two daemons on one
        # machine share one page cache, so a plain folder there is safe too.
        flags |= libvirt.VIR_MIGRATE_UNSAFE
    dom.migrate3(destination, params, flags)
    return current.get("disk_path", "")
