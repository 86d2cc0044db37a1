"""What a lease's reservations hold: the fields a reservation request carries, the hosts its
VMs were launched on (their capacity must stay put) and the slots it may still place; and
whom an event about a lease concerns."""

from __future__ import annotations

from django.db.models import Count

from leases.models import Lease, Reservation

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
