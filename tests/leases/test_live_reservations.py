"""What holds lease capacity is one rule (``leases.models.live_reservation``): a reservation
pending or active, in a lease pending or active. Tried on every pair of statuses, every place
that counts lease capacity agrees with it: lease planning, the owner's quota, the VMs that keep
a host in the free pool, the capabilities a lease holds a host for, and the repair of a host
that fails."""

from __future__ import annotations

import pytest

from leases.capacity import reservable_rooms
from leases.free_pool import HostRefused, running_lease_vms, update_capabilities
from leases.models import Lease, LeaseStatus, ReservationStatus
from leases.repair import withdraw_host
from project.errors import Refused
from tests.leases.fixtures import at, instances

STATES = [(lease, reservation) for lease in LeaseStatus for reservation in ReservationStatus]


@pytest.mark.parametrize(("lease_status", "reservation_status"), STATES)
def test_every_place_counting_lease_capacity_agrees_on_what_holds_it(
    reservable_hosts, make_lease, make_vm, settings, lease_status, reservation_status
):
    live = lease_status in ("PENDING", "ACTIVE") and reservation_status in ("pending", "active")
    [host] = reservable_hosts(1, capabilities={"zone": "a"})
    lease = make_lease(at(10), at(12), instances(1, zone="a"))
    reservation = lease.reservations.get()
    Lease.objects.filter(pk=lease.pk).update(status=lease_status)
    lease.reservations.update(status=reservation_status)

    room = reservable_rooms(at(10), at(12), lock=False)[host.pk]
    assert room.free_slots(at(10), at(12), vcpus=1, memory_mb=1024) == (2 if live else 3)

    make_vm(host.cluster, host=host, status="up", reservation=reservation, name="launched")
    assert running_lease_vms(host) == (["launched"] if live else [])

    settings.LEASE_QUOTA_INSTANCES = 1
    second = dict(owner=lease.owner, name="second")
    if live:
        with pytest.raises(Refused, match="quota"):
            make_lease(at(11), at(13), instances(1), **second)
    else:
        make_lease(at(11), at(13), instances(1), **second)
    settings.LEASE_QUOTA_INSTANCES = 0

    if live:
        with pytest.raises(HostRefused, match="hold host .* for its zone"):
            update_capabilities(host, {"zone": "b"})
    else:
        assert update_capabilities(host, {"zone": "b"}).capabilities == {"zone": "b"}

    repaired = withdraw_host(host.pk, "is in maintenance", leaves_pool=False)
    assert (reservation.pk in {outcome.reservation.pk for outcome in repaired}) == live
