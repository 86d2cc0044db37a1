"""Where a VM launched into a lease's reservation may run: the hosts with a slot left for it
(registered with the scheduler as a reserved-capacity provider)."""

from __future__ import annotations

from hosts.models import VirtualMachine
from leases.models import LeaseStatus
from leases.reservations import reserved_slots


def reserved_hosts(vm: VirtualMachine) -> set[int] | None:
    """For a VM launched into a lease's reservation: the hosts with a slot left for it (none
    while the lease is not active). None for any other VM."""
    if vm.reservation_id is None:
        return None
    reservation = vm.reservation
    if reservation.lease.status != LeaseStatus.ACTIVE:
        return set()
    return {
        host for host, left in reserved_slots(reservation, exclude_vm=vm.pk).items() if left > 0
    }
