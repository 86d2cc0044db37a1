"""What a lab host keeps across an orderly stop, as a real host keeps it across a restart.

A KVM host shut down with libvirt-guests (``ON_SHUTDOWN=suspend``, ``ON_BOOT=start``) keeps
its persistent domains defined and saves its running guests, which resume where they were
when it boots. The lab's hosts do the same when ``simhosts stop`` stops them and ``simhosts
start`` starts them again (as ``make run`` does on Ctrl-C and the next run):

- a real QEMU host's running guests are managed-saved (``suspend_guests``) and restored on
  start (``resume_guests``); its definitions live in its folder already;
- libvirt's test driver keeps its domains in the daemon's memory only, so a simulated host
  writes them (definition, snapshots, whether they ran) to its folder (``save``) and defines
  them again on start, running again those that ran (``restore``).

A killed daemon saves nothing: that host lost what it ran (a crash, or a host reinstalled).
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.etree import ElementTree

import libvirt

from hosts.driver.libvirt.connection import call

SAVED_FILE = "corral-domains.json"
INACTIVE_XML = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE


def save(uri: str, folder: Path) -> int:
    """Write the persistent domains of the test-driver host at ``uri`` to ``folder``; how
    many. Transient domains are left out, as a real host loses them."""

    def read(conn: libvirt.virConnect) -> list[dict]:
        return [
            {
                "uuid": dom.UUIDString(),
                "xml": dom.XMLDesc(INACTIVE_XML),
                "state": dom.state()[0],
                "snapshots": [
                    snapshot.getXMLDesc(0)
                    for snapshot in sorted(dom.listAllSnapshots(), key=_creation_time)
                ],
            }
            for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_PERSISTENT)
        ]

    domains = call(uri, "read the host's domains", read, retry=True)
    (folder / SAVED_FILE).write_text(json.dumps(domains))
    return len(domains)


def _creation_time(snapshot: libvirt.virDomainSnapshot) -> int:
    """A snapshot's creation time, so that parents are redefined before their children."""
    return int(ElementTree.fromstring(snapshot.getXMLDesc(0)).findtext("creationTime") or 0)


def restore(uri: str, folder: Path) -> int:
    """Define again on the test-driver host at ``uri`` what ``save`` wrote to ``folder``,
    running (or paused) again what ran; how many. The file is used once."""
    path = folder / SAVED_FILE
    if not path.exists():
        return 0
    domains = json.loads(path.read_text())

    def define(conn: libvirt.virConnect) -> None:
        present = {dom.UUIDString() for dom in conn.listAllDomains()}
        for saved in domains:
            if saved["uuid"] in present:
                continue  # one the driver makes itself (its domain ``test``)
            # One that cannot come back is lost, as on a host that lost it: the sync says so.
            with contextlib.suppress(libvirt.libvirtError):
                _define(conn, saved)

    # Through this process's kept connection: the test driver forgets its domains once no
    # client is connected, so a connection closed here would take them away again.
    call(uri, "define the host's domains again", define)
    path.unlink()
    return len(domains)


def _define(conn: libvirt.virConnect, saved: dict) -> None:
    dom = conn.defineXML(saved["xml"])
    for snapshot in saved["snapshots"]:
        dom.snapshotCreateXML(snapshot, libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE)
    if saved["state"] in (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_BLOCKED):
        dom.create()
    elif saved["state"] == libvirt.VIR_DOMAIN_PAUSED:
        dom.create()
        dom.suspend()


def suspend_guests(uri: str) -> list[str]:
    """Managed-save every running persistent guest of the QEMU host at ``uri`` (their names),
    all at once (each save writes its guest's memory to disk: the stop takes the longest one,
    not their sum); a guest that cannot be saved, or a transient one, is powered off."""

    def save(dom: libvirt.virDomain) -> str | None:
        try:
            if not dom.isPersistent():
                raise libvirt.libvirtError("a transient guest cannot be saved")
            dom.managedSave(0)
            return dom.name()
        except libvirt.libvirtError:
            with contextlib.suppress(libvirt.libvirtError):
                dom.destroy()
            return None

    def run(conn: libvirt.virConnect) -> list[str]:
        running = conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        if not running:
            return []
        with ThreadPoolExecutor(max_workers=len(running)) as savers:
            return [name for name in savers.map(save, running) if name is not None]

    return call(uri, "save the host's guests", run)


def resume_guests(uri: str) -> list[str]:
    """Start every guest of the QEMU host at ``uri`` that has a managed save, which resumes it
    where it was (their names). One that cannot resume loses its saved state and stays off,
    as libvirt-guests leaves it."""

    def run(conn: libvirt.virConnect) -> list[str]:
        resumed = []
        for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_MANAGEDSAVE):
            try:
                dom.create()
                resumed.append(dom.name())
            except libvirt.libvirtError:
                with contextlib.suppress(libvirt.libvirtError):
                    dom.managedSaveRemove(0)
        return resumed

    return call(uri, "resume the host's saved guests", run)
