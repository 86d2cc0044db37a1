"""The free pool of leases (Blazar's os-hosts): the hosts marked reservable, which leases may
reserve; joining and leaving it, the hosts' capabilities (Blazar's extra capabilities) and which
host properties are private.

Marking and un-marking lock the reservable hosts' rows, as lease planning does, so a lease is
never planned on a host that is leaving the free pool at the same moment. A host joins the
free pool with the VMs already running on it: the planner counts them until they stop. One
leaves it with its leases planned again elsewhere (leases/repair.py), refused only while VMs
launched into its leases run there.
"""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone

from hosts.models import HOLDING_STATUSES, Cluster, Host
from leases.capacity import lock_reservable_hosts
from leases.error_codes import LeaseErrorCode
from leases.models import Allocation, HostProperty, live_reservation
from leases.properties import HYPERVISOR_PROPERTIES
from leases.repair import Outcome, withdraw_host
from project import events
from project.errors import Refused
from project.models import EventKind


class HostRefused(Refused):
    def __init__(self, message: str) -> None:
        super().__init__(LeaseErrorCode.HOST_REFUSED, message)


def _live_allocations(host: Host):
    return (
        Allocation.objects.live(timezone.now())
        .filter(host=host)
        .select_related("reservation__lease")
    )


def _lease_names(allocations) -> str:
    return ", ".join(sorted({a.reservation.lease.name for a in allocations}))


def _save(host: Host, message: str) -> Host:
    host.save(update_fields=["reservable", "capabilities", "updated_at"])
    events.emit(EventKind.CHANGED, "host", host.pk, message, cluster_id=host.cluster_id)
    return host


@transaction.atomic
def make_reservable(host: Host, capabilities: dict) -> Host:
    """Put a host in the free pool of leases, with these capabilities added to its own.

    VMs outside any lease running on it keep running; the planner counts what they use until
    they stop, so no lease is promised it (and no other VM is placed there from now on).
    """
    # The cluster's scheduling lock: a VM being placed on the host right now is on it, and
    # counted, before the host joins the pool.
    list(Cluster.objects.select_for_update().filter(pk=host.cluster_id).values("pk"))
    host = Host.objects.select_for_update(no_key=True).get(pk=host.pk)
    if host.reservable:
        raise HostRefused(f"Host {host.name} is reservable already.")
    host.reservable = True
    host.capabilities = {**(host.capabilities or {}), **capabilities}
    outside = host.vms.filter(status__in=HOLDING_STATUSES, reservation__isnull=True).count()
    running = f"; {outside} VM(s) outside leases run on it until they stop" if outside else ""
    return _save(host, f"Host {host.name} is reservable{running}")


@transaction.atomic
def update_capabilities(host: Host, values: dict) -> Host:
    """Set capabilities (a value of None removes one). A capability that a live reservation
    holding this host asks for cannot change under it."""
    host = Host.objects.select_for_update(no_key=True).get(pk=host.pk)
    current = dict(host.capabilities or {})
    holders = [
        allocation
        for allocation in _live_allocations(host)
        for key in allocation.reservation.host_properties or {}
        if key not in HYPERVISOR_PROPERTIES and key in values and values[key] != current.get(key)
    ]
    if holders:
        keys = sorted(
            {
                key
                for allocation in holders
                for key in allocation.reservation.host_properties
                if key in values
            }
        )
        raise HostRefused(
            f"Leases {_lease_names(holders)} hold host {host.name} for its {', '.join(keys)}; "
            "that cannot change while they do."
        )
    for key, value in values.items():
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    host.capabilities = current
    return _save(host, f"Host {host.name}: capabilities changed")


def running_lease_vms(host: Host) -> list[str]:
    """Names of the VMs of live leases running on the host (at most six)."""
    return list(
        host.vms.filter(live_reservation("reservation__"), status__in=HOLDING_STATUSES)
        .order_by("name")
        .values_list("name", flat=True)[:6]
    )


@transaction.atomic
def make_unreservable(host: Host) -> tuple[Host, list[Outcome]]:
    """Take a host out of the free pool: the capacity live leases held on it is planned again
    on the other reservable hosts, and a lease it cannot all move to is degraded (what
    happened to each is returned). Refused while VMs launched into live leases run on it:
    they would run on a host no longer reserved for them. The Corral host itself (and its
    capabilities) stays."""
    lock_reservable_hosts()
    host = Host.objects.select_for_update(no_key=True).get(pk=host.pk)
    running = running_lease_vms(host)
    if running:
        more = ", …" if len(running) > 5 else ""
        raise HostRefused(
            f"Host {host.name} runs VMs of leases ({', '.join(running[:5])}{more}); it stays "
            "reservable until they stop or move."
        )
    outcomes = withdraw_host(host.pk, "is no longer reservable", leaves_pool=True)
    host.reservable = False
    return _save(host, f"Host {host.name} is no longer reservable"), outcomes


def host_properties(include_private: bool) -> list[dict]:
    """Every capability the reservable hosts offer: its name, whether it is private, and the
    values hosts give it."""
    values: dict[str, set] = {}
    for capabilities in Host.objects.filter(reservable=True).values_list("capabilities", flat=True):
        for key, value in (capabilities or {}).items():
            if isinstance(value, list | dict):  # set by an admin; shown as written
                value = json.dumps(value, sort_keys=True)
            values.setdefault(key, set()).add(value)
    private = set(HostProperty.objects.filter(private=True).values_list("name", flat=True))
    return [
        {"property": name, "private": name in private, "values": sorted(found, key=str)}
        for name, found in sorted(values.items())
        if include_private or name not in private
    ]


@transaction.atomic
def set_property_private(name: str, private: bool) -> HostProperty | None:
    """Make a property private (hidden from lease users' property list) or public again;
    None when no reservable host offers it."""
    offered = Host.objects.filter(reservable=True, capabilities__has_key=name).exists()
    if not offered:
        return None
    prop, _ = HostProperty.objects.update_or_create(name=name, defaults={"private": private})
    return prop
