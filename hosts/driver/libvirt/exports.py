"""A VM's disk copied off its host as one standalone qcow2 (an image made from the VM).

QEMU locks the disk of a running guest: its shared "write" lock refuses any other process
that opens the file, ``qemu-img convert`` too (which libvirt's volume clone runs), so a running
domain's disk is copied by its own QEMU: a block copy (``virDomainBlockCopy``, a full mirror
into a new qcow2 volume without a backing file) that, once in step with the disk, is cut
(``virDomainBlockJobAbort`` without a pivot: the copy holds the disk as of that instant and
the guest stays on its own disk), the guest's filesystems frozen through its agent
(``virDomainFSFreeze``) for that instant only and thawed at once. A shut-off domain's disk is
locked by nobody: it is cloned (``virStorageVolCreateXMLFrom``, which flattens the backing
chain). Either way the copy is a temporary volume of the host's pool, downloaded through a
stream (so a remote host works like a local one) and deleted.
"""

from __future__ import annotations

import contextlib
import os
import time
from xml.etree import ElementTree
from xml.sax.saxutils import escape, quoteattr

import libvirt

from hosts.driver.base import (
    DiskCopy,
    DiskWriter,
    DriverError,
    GuestAgentUnavailable,
    ImageTooBig,
    NoRoom,
)
from hosts.driver.libvirt import storage
from hosts.driver.libvirt.connection import call
from hosts.driver.libvirt.guests import export_volume
from hosts.driver.libvirt.volumes import lookup_volume, running_pool

CHUNK = 256 * 1024
POLL_S = 0.1
# A block copy whose progress stands still this long has stopped on the host.
STALLED_S = 120
# libvirt's errors for an agent that does not answer, or a guest without one.
AGENT_ERRORS = {
    libvirt.VIR_ERR_AGENT_UNRESPONSIVE,
    libvirt.VIR_ERR_AGENT_UNSYNCED,
    libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED,
}
NO_AGENT = (
    "The guest agent does not answer, so the guest's filesystems cannot be frozen for the copy."
)


def export_disk(
    uri: str, uuid: str, pool_name: str, volume_name: str, target: str, *, quiesce: bool, limit: int
) -> DiskCopy:
    """Copy the domain's disk (``volume_name`` of ``pool_name``) into the local file ``target``
    as one standalone qcow2, hashed as it arrives; see the module for how."""

    def run(conn: libvirt.virConnect) -> DiskCopy:
        dom = conn.lookupByUUIDString(uuid)
        pool = running_pool(conn, pool_name)
        storage.refresh(pool)
        source = lookup_volume(pool, volume_name)
        if source is None:
            raise DriverError(
                "The VM has no disk on its host.", detail=f"{uri}: no volume {volume_name}"
            )
        _delete(lookup_volume(pool, export_volume(uuid)))  # left by a copy that was cut short
        running = dom.isActive()
        if running and quiesce and not _agent_answers(dom):
            raise GuestAgentUnavailable(NO_AGENT, uri=uri)
        _check_room(conn, pool, source)
        copy = None
        try:
            if running:
                copy = _mirror(dom, pool, source, export_volume(uuid), quiesce)
            else:
                copy = pool.createXMLFrom(
                    _copy_xml(export_volume(uuid), source.info()[1]), source, 0
                )
            size = copy.infoFlags(libvirt.VIR_STORAGE_VOL_GET_PHYSICAL)[2]
            if size > limit:
                raise ImageTooBig(
                    f"The VM's disk makes an image of {size} bytes, over the limit of {limit}."
                )
            return _download(conn, copy, target)
        finally:
            _delete(copy)

    try:
        return call(uri, "make an image of the VM's disk", run)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise


def _delete(volume: libvirt.virStorageVol | None) -> None:
    if volume is not None:
        with contextlib.suppress(libvirt.libvirtError):
            volume.delete(0)


def _copy_xml(name: str, capacity: int) -> str:
    """A qcow2 volume (version 3) without a backing file: what the copy is made into."""
    return (
        f"<volume><name>{escape(name)}</name><capacity unit='bytes'>{int(capacity)}</capacity>"
        "<target><format type='qcow2'/><compat>1.1</compat></target></volume>"
    )


def _agent_answers(dom: libvirt.virDomain) -> bool:
    """Whether the guest agent answers (asked for the guest's clock, which changes nothing)."""
    try:
        dom.getTime()
    except libvirt.libvirtError as exc:
        if exc.get_error_code() in AGENT_ERRORS:
            return False
        raise
    return True


def _check_room(
    conn: libvirt.virConnect, pool: libvirt.virStoragePool, source: libvirt.virStorageVol
) -> None:
    """Refuse (``NoRoom``) when the pool cannot hold what the disk and its backing chain have
    written: the most the copy takes."""
    needed, volume = 0, source
    for _ in range(8):  # an overlay, its base; never a loop
        needed += volume.info()[2]
        backing = ElementTree.fromstring(volume.XMLDesc(0)).findtext("backingStore/path")
        if not backing:
            break
        try:
            volume = conn.storageVolLookupByPath(backing)
        except libvirt.libvirtError:
            break
    available = pool.info()[3]
    if needed > available:
        raise NoRoom(
            f"The copy of the VM's disk needs up to {needed} bytes; the host's pool has "
            f"{available} free."
        )


def _mirror(
    dom: libvirt.virDomain,
    pool: libvirt.virStoragePool,
    source: libvirt.virStorageVol,
    name: str,
    quiesce: bool,
) -> libvirt.virStorageVol:
    """The running domain's disk copied into a new volume ``name`` by a block copy, cut once
    in step (frozen through the agent for that instant when ``quiesce``)."""
    device = _device_of(dom, source.path())
    copy = pool.createXML(_copy_xml(name, source.info()[1]), 0)
    destination = (
        f"<disk type='file'><source file={quoteattr(copy.path())}/><driver type='qcow2'/></disk>"
    )
    # Reuse the volume just made (its format and no backing file); a transient job, so a
    # persistent domain may copy (its definition never names the copy).
    flags = libvirt.VIR_DOMAIN_BLOCK_COPY_REUSE_EXT | libvirt.VIR_DOMAIN_BLOCK_COPY_TRANSIENT_JOB
    try:
        dom.blockCopy(device, destination, None, flags)
        try:
            _wait_in_step(dom, device)
            frozen = quiesce and _freeze(dom)
            try:
                dom.blockJobAbort(device, 0)  # no pivot: the guest stays on its disk
            finally:
                if frozen:
                    dom.fsThaw(None, 0)
        except BaseException:
            with contextlib.suppress(libvirt.libvirtError):
                dom.blockJobAbort(device, 0)
            raise
    except BaseException:
        _delete(copy)
        raise
    return copy


def _device_of(dom: libvirt.virDomain, path: str) -> str:
    """The target device (``vda``) of the domain's disk whose file is ``path``."""
    for disk in ElementTree.fromstring(dom.XMLDesc(0)).iterfind("devices/disk"):
        source = disk.find("source")
        if source is not None and source.get("file") == path:
            return disk.find("target").get("dev")
    raise DriverError("The VM does not run on its disk volume.", detail=f"no disk on {path}")


def _wait_in_step(dom: libvirt.virDomain, device: str) -> None:
    """Wait until the block copy of ``device`` is in step with the disk (libvirt's mirror is
    ready); fail when it ends on its own or stands still for ``STALLED_S``."""
    last, moved_at = -1, time.monotonic()
    while True:
        info = dom.blockJobInfo(device, 0)
        if not info:
            raise DriverError("The copy of the VM's disk stopped on the host.")
        if _mirror_ready(dom, device):
            return
        if info["cur"] != last:
            last, moved_at = info["cur"], time.monotonic()
        elif time.monotonic() - moved_at > STALLED_S:
            raise DriverError(f"The copy of the VM's disk made no progress for {STALLED_S} s.")
        time.sleep(POLL_S)


def _mirror_ready(dom: libvirt.virDomain, device: str) -> bool:
    for disk in ElementTree.fromstring(dom.XMLDesc(0)).iterfind("devices/disk"):
        target = disk.find("target")
        if target is not None and target.get("dev") == device:
            mirror = disk.find("mirror")
            return mirror is not None and mirror.get("ready") == "yes"
    return False


def _freeze(dom: libvirt.virDomain) -> bool:
    """Freeze the guest's filesystems through its agent (``GuestAgentUnavailable`` when it does
    not answer); True once frozen."""
    try:
        dom.fsFreeze(None, 0)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() in AGENT_ERRORS:
            raise GuestAgentUnavailable(NO_AGENT) from exc
        raise
    return True


def _download(conn: libvirt.virConnect, volume: libvirt.virStorageVol, target: str) -> DiskCopy:
    with open(target, "wb") as out:
        writer = DiskWriter(out)
        stream = conn.newStream(0)
        volume.download(stream, 0, 0, 0)
        stream.recvAll(lambda _stream, data, writer: writer.write(data), writer)
        stream.finish()
    return writer.copy()
