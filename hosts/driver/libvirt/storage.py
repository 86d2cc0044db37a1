"""Storage on a host: the libvirt storage pool that holds Corral's volumes on that host, and
which hosts' pools are one folder (shared storage).

Corral reaches a host's disks only through libvirt (volumes, upload and download streams),
never through its file system, so the same code works for a local and a remote host. Whether
two hosts' pools are one folder is seen the same way: a marker volume made through one host is
looked for through the other.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid as uuids
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import libvirt

from hosts.driver.base import STORAGE_POOL, DriverError
from hosts.driver.libvirt.connection import call

REFRESH_TRIES = 10
REFRESH_PAUSE_S = 0.2


def refresh(pool: libvirt.virStoragePool) -> None:
    """Rescan the pool's directory for files written outside libvirt (a serial log). While
    a volume of the pool is being uploaded libvirt refuses ("asynchronous jobs running"):
    tried again a few times, then left as it was (the volumes libvirt made itself are known
    to it without a rescan)."""
    for _ in range(REFRESH_TRIES):
        try:
            pool.refresh(0)
            return
        except libvirt.libvirtError as exc:
            if "asynchronous jobs" not in (exc.get_error_message() or ""):
                raise
        time.sleep(REFRESH_PAUSE_S)


def storage_pool_xml(path: str, name: str = STORAGE_POOL) -> str:
    return (
        f"<pool type='dir'><name>{escape(name)}</name>"
        f"<target><path>{escape(path)}</path></target></pool>"
    )


def ensure_storage_pool(uri: str, path: str, name: str = STORAGE_POOL) -> str:
    """A running, autostarted directory pool ``name`` on the host; returns its folder.

    Defined at ``path`` (and the folder made) when the host has no such pool; an existing pool
    keeps its folder and is started if it was stopped.
    """

    def run(conn: libvirt.virConnect) -> str:
        try:
            pool = conn.storagePoolLookupByName(name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_POOL:
                raise
            pool = conn.storagePoolDefineXML(storage_pool_xml(path, name), 0)
            pool.build(0)
        if not pool.isActive():
            pool.create(0)
        if not pool.autostart():
            pool.setAutostart(1)
        return storage_pool_path(pool)

    return call(uri, f"set up the storage pool {name}", run)


def storage_pool_path(pool: libvirt.virStoragePool) -> str:
    return ElementTree.fromstring(pool.XMLDesc(0)).findtext("target/path") or ""


# A host's mark in its pool's folder, named after the host's marker (a UUID Corral keeps).
MARKER = re.compile(
    r"corral-host-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.marker"
)


def marker_volume(marker: str) -> str:
    name = f"corral-host-{marker}.marker"
    if not MARKER.fullmatch(name):
        raise DriverError("A host's storage marker is a UUID.", detail=repr(marker))
    return name


def _empty_volume_xml(name: str) -> str:
    return (
        f"<volume><name>{escape(name)}</name><capacity unit='bytes'>0</capacity>"
        "<target><format type='raw'/></target></volume>"
    )


def active_pool(conn: libvirt.virConnect, name: str) -> libvirt.virStoragePool | None:
    """The pool ``name`` when the host has it and it runs; None otherwise."""
    try:
        pool = conn.storagePoolLookupByName(name)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() in (libvirt.VIR_ERR_NO_STORAGE_POOL, libvirt.VIR_ERR_NO_SUPPORT):
            return None
        raise
    return pool if pool.isActive() else None


def pool_markers(conn: libvirt.virConnect, pool_name: str, marker: str) -> frozenset[str] | None:
    """Put the host's mark (``marker``) in its running pool unless it is there, then read the
    marks in the pool's folder: the markers of every host whose pool is that folder, this
    host's among them. None when the host has no such running pool."""
    pool = active_pool(conn, pool_name)
    if pool is None:
        return None
    own = marker_volume(marker)
    refresh(pool)
    names = set(pool.listVolumes())
    if own not in names:
        # Made meanwhile through another host sharing the folder: there all the same.
        with contextlib.suppress(libvirt.libvirtError):
            pool.createXML(_empty_volume_xml(own), 0)
        names.add(own)
    return frozenset(m[1] for m in map(MARKER.fullmatch, names) if m is not None)


def sees_same_storage(
    source_uri: str, source_pool: str, destination_uri: str, destination_pool: str
) -> bool:
    """Whether the two hosts' pools are one folder, as they show it now: a volume of a name
    never used before is made through the source and looked for through the destination,
    then deleted. (Marks kept in the folder could be left over from an earlier setup; this
    one cannot.)"""
    name = f"corral-check-{uuids.uuid4().hex}.marker"

    def make(conn: libvirt.virConnect) -> None:
        pool = conn.storagePoolLookupByName(source_pool)
        pool.createXML(_empty_volume_xml(name), 0)

    def look(conn: libvirt.virConnect) -> bool:
        pool = active_pool(conn, destination_pool)
        if pool is None:
            return False
        refresh(pool)
        return name in pool.listVolumes()

    def remove(conn: libvirt.virConnect) -> None:
        pool = conn.storagePoolLookupByName(source_pool)
        with contextlib.suppress(libvirt.libvirtError):
            pool.storageVolLookupByName(name).delete(0)

    call(source_uri, "check which hosts see the storage pool", make)
    try:
        return call(destination_uri, "check which hosts see the storage pool", look)
    finally:
        call(source_uri, "check which hosts see the storage pool", remove)
