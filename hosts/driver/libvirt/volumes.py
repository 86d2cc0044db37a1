"""Volumes in a host's storage pool: images copied in by upload streams, VMs' overlay disks.

Only libvirt's storage API is used (pool lookups, ``createXML``, upload and download streams),
so a remote host works like a local one. A copy that fails or does not match its checksum is
deleted before the error is raised: no half-made volume is left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
from xml.sax.saxutils import escape, quoteattr

import libvirt

from hosts.driver.base import DriverError, NoRoom, NoStoragePool, PoolSpace
from hosts.driver.libvirt import storage
from hosts.driver.libvirt.connection import call
from hosts.driver.libvirt.storage import storage_pool_xml

CHUNK = 256 * 1024


def keeps_disks(uri: str) -> bool:
    """A libvirt host keeps images and VMs' disks as volumes of its storage pool."""
    return True


def running_pool(conn: libvirt.virConnect, name: str, path: str = "") -> libvirt.virStoragePool:
    """The running pool ``name``; defined (as a directory pool at ``path``), built and started
    when missing and a path is given."""
    try:
        pool = conn.storagePoolLookupByName(name)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_POOL:
            raise
        if not path:
            raise NoStoragePool(
                f"The host has no storage pool {name!r}: create it, or give the host a storage "
                "path for Corral to make it."
            ) from None
        pool = conn.storagePoolDefineXML(storage_pool_xml(path, name), 0)
        pool.build(0)
        pool.setAutostart(1)
    if not pool.isActive():
        pool.create(0)
    return pool


def ensure_pool(uri: str, name: str, path: str = "") -> PoolSpace:
    """Make sure the pool runs (see ``_pool``); its capacity and free space."""

    def run(conn):
        pool = running_pool(conn, name, path)
        storage.refresh(pool)
        _state, capacity, _allocation, available = pool.info()
        return PoolSpace(capacity, available)

    return call(uri, f"set up the storage pool {name}", run)


def pool_space(conn: libvirt.virConnect, name: str) -> PoolSpace | None:
    """The pool's capacity and free space, or None when the host has no such running pool."""
    try:
        pool = conn.storagePoolLookupByName(name)
        if not pool.isActive():
            return None
        _state, capacity, _allocation, available = pool.info()
    except libvirt.libvirtError:
        return None
    return PoolSpace(capacity, available)


def lookup_volume(pool: libvirt.virStoragePool, name: str) -> libvirt.virStorageVol | None:
    """The pool's volume ``name``, or None when it has none of that name."""
    try:
        return pool.storageVolLookupByName(name)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_VOL:
            raise
        return None


def volume_path(uri: str, pool_name: str, name: str) -> str | None:
    """The volume's path on the host, or None when the pool has no such volume."""

    def read(conn):
        pool = running_pool(conn, pool_name)
        storage.refresh(pool)
        volume = lookup_volume(pool, name)
        return volume.path() if volume is not None else None

    return call(uri, "look up a volume", read, retry=True)


def upload(
    uri: str, pool_name: str, pool_path: str, name: str, fmt: str, source: str, sha256: str
) -> str:
    """Copy the local file ``source`` into a new volume ``name`` (format ``fmt``) and check
    it by reading it back; returns the volume's path. A volume left by a failed copy is
    replaced; a failed or mismatched copy is deleted."""

    def run(conn):
        pool = running_pool(conn, pool_name, pool_path)
        storage.refresh(pool)
        old = lookup_volume(pool, name)
        if old is not None:
            old.delete(0)
        with open(source, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(0)
            available = pool.info()[3]
            if size > available:
                raise NoRoom(
                    f"The image needs {size} bytes; the pool {pool_name} has {available} free."
                )
            volume = pool.createXML(_volume_xml(name, size, fmt), 0)
            try:
                stream = conn.newStream(0)
                volume.upload(stream, 0, size, 0)
                stream.sendAll(lambda _s, nbytes, f: f.read(min(nbytes, CHUNK)), fh)
                stream.finish()
                got = _checksum(conn, volume, size)
                if got != sha256:
                    raise DriverError(
                        f"The copy of {name} does not match: sha256 {got}, expected {sha256}."
                    )
            except BaseException:
                with contextlib.suppress(libvirt.libvirtError):
                    volume.delete(0)
                raise
        return volume.path()

    return call(uri, f"copy the image {name} to the host", run)


def _checksum(conn: libvirt.virConnect, volume: libvirt.virStorageVol, size: int) -> str:
    digest = hashlib.sha256()
    stream = conn.newStream(0)
    volume.download(stream, 0, size, 0)

    def take(_stream, data, digest):
        digest.update(data)
        return len(data)

    stream.recvAll(take, digest)
    stream.finish()
    return digest.hexdigest()


def _volume_xml(name: str, size: int, fmt: str, backing: tuple[str, str] | None = None) -> str:
    backing_xml = ""
    if backing is not None:
        path, backing_format = backing
        backing_xml = (
            f"<backingStore><path>{escape(path)}</path>"
            f"<format type={quoteattr(backing_format)}/></backingStore>"
        )
    return (
        f"<volume><name>{escape(name)}</name>"
        f"<capacity unit='bytes'>{int(size)}</capacity>"
        f"<target><format type={quoteattr(fmt)}/></target>{backing_xml}</volume>"
    )


def create_disk(
    uri: str,
    pool_name: str,
    name: str,
    size: int,
    backing: tuple[str, str] | None = None,
    *,
    replace: bool = False,
) -> str:
    """The qcow2 disk ``name`` (``size`` bytes), an overlay over ``backing`` (path, format) or
    blank; an existing one is kept unless ``replace``. Returns its path."""

    def run(conn):
        pool = running_pool(conn, pool_name)
        storage.refresh(pool)
        existing = lookup_volume(pool, name)
        if existing is not None:
            if not replace:
                return existing.path()
            existing.delete(0)
        return pool.createXML(_volume_xml(name, size, "qcow2", backing), 0).path()

    return call(uri, f"create the disk {name}", run)


def delete(uri: str, pool_name: str, name: str) -> bool:
    """Delete the volume; True if there was one. A host without the pool has none."""

    def run(conn):
        try:
            pool = conn.storagePoolLookupByName(pool_name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_POOL:
                return False
            raise
        if not pool.isActive():
            return False
        storage.refresh(pool)
        volume = lookup_volume(pool, name)
        if volume is None:
            return False
        try:
            volume.delete(0)
        except libvirt.libvirtError as exc:
            # Deleted meanwhile by another job (a copy of a deleted image removing its volume
            # while that image's delete job does too): gone all the same.
            if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
                return False
            raise
        return True

    return call(uri, f"delete the volume {name}", run)
