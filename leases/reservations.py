"""What a lease's reservations hold: the fields a reservation request carries, the hosts its
VMs were launched on (their capacity must stay put) and the slots it may still place, the
server group OpenStack's APIs name for it; and whom an event about a lease concerns."""

from __future__ import annotations

import uuid

from django.db.models import Count

from leases.models import Lease, Reservation, ResourceType

RESERVATION_FIELDS = (
    "resource_type",
    "vcpus",
    "memory_mb",
    "disk_gb",
    "amount",
    "affinity",
    "min",
    "max",
    "host_properties",
)


def lease_scope(lease: Lease) -> dict:
    """Who an event about the lease concerns: the lease and its owner."""
    return {"lease_id": lease.pk, "user_id": lease.owner_id}


def server_group_id(reservation: Reservation) -> str | None:
    """The server group an instance reservation stands for in OpenStack's APIs (Blazar makes
    one per reservation with an affinity, ``affinity`` or ``anti-affinity``): a UUID stable
    for the reservation, or None when its affinity is None (any host), as Blazar leaves it."""
    if reservation.resource_type != ResourceType.INSTANCE or reservation.affinity is None:
        return None
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"corral:reservation:{reservation.pk}"))


def launched_on(reservation: Reservation) -> dict[int, int]:
    """Host id -> VMs of the reservation defined there (their capacity must stay put)."""
    return dict(
        reservation.vms.exclude(host__isnull=True)
        .values("host_id")
        .annotate(n=Count("id"))
        .values_list("host_id", "n")
    )


def reserved_slots(reservation: Reservation, exclude_vm: int | None = None) -> dict[int, int]:
    """Host id -> instances the reservation may still place there (whole hosts: no limit)."""
    used = dict(
        reservation.vms.exclude(host__isnull=True)
        .exclude(pk=exclude_vm)
        .values("host_id")
        .annotate(n=Count("id"))
        .values_list("host_id", "n")
    )
    return {
        allocation.host_id: (
            10**6 if allocation.whole_host else allocation.slots - used.get(allocation.host_id, 0)
        )
        for allocation in reservation.allocations.all()
        if allocation.host_id is not None  # capacity it is owed but holds nowhere
    }
