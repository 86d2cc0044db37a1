"""A lab host starts clean: domains Corral made there that no VM of this database owns.

A lab host outlives its database: ``make run`` on a fresh database, after an earlier run,
finds the earlier run's guests still defined (and running) on the lab's own daemons. They are
Corral's (its metadata is in their XML) but nobody's now, so they only take the host's memory
and show as changes made outside Corral. ``remove`` takes them away with their files (disk
overlay, cloud-init seed, serial log); a domain without Corral's metadata, and any domain of a
VM this database knows, is left alone.
"""

from __future__ import annotations

import libvirt

from hosts import driver
from hosts.driver.libvirt import guests, volumes
from hosts.driver.libvirt.connection import call
from hosts.driver.libvirt.domains import CORRAL_XMLNS
from hosts.models import VirtualMachine
from hosts.operations.disks import disk_name


def _corral_domains(uri: str) -> dict[str, str]:
    """{uuid: name} of the domains on the host that Corral made."""

    def read(conn: libvirt.virConnect) -> dict[str, str]:
        return {
            dom.UUIDString(): dom.name()
            for dom in conn.listAllDomains()
            if CORRAL_XMLNS in dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        }

    return call(uri, "list the host's domains", read, retry=True)


def remove(uri: str, storage_pool: str = driver.STORAGE_POOL) -> list[str]:
    """Remove the domains Corral made on the host that no VM of this database owns; their
    names, in order."""
    made = _corral_domains(uri)
    owned = {
        str(uuid)
        for uuid in VirtualMachine.objects.filter(uuid__in=list(made)).values_list(
            "uuid", flat=True
        )
    }
    removed = []
    for uuid, name in sorted(made.items(), key=lambda item: item[1]):
        if uuid in owned:
            continue
        driver.undefine(uri, uuid)
        guests.remove_guest_files(uri, uuid, storage_pool)
        volumes.delete(uri, storage_pool, disk_name(VirtualMachine(uuid=uuid)))
        removed.append(name)
    return removed
