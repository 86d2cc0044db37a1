"""Storage on a host: the libvirt storage pool that holds Corral's volumes on that host.

Corral reaches a host's disks only through libvirt (volumes, upload and download streams),
never through its file system, so the same code works for a local and a remote host.
"""

from __future__ import annotations

import time
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import libvirt

from hosts.driver.base import STORAGE_POOL
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
