"""A reservable host stops responding: the capacity its leases held moves to other reservable
hosts when they have room over the leases' windows; a lease whose capacity cannot move is
marked degraded, with an alert saying which reservation misses how much from when, and the
capacity stays held on the host for its return."""

import pytest

from hosts import sync
from leases import lifecycle, reservations
from leases.models import Lease, LeaseStatus
from project.models import Event, EventKind
from tests.leases.fixtures import PER_HOST, allocations_of, at, instances, whole_hosts

pytestmark = pytest.mark.django_db


@pytest.fixture
def fail(django_capture_on_commit_callbacks):
    """fail(host) -> the host marked unreachable by the sync, as when libvirt stops answering
    (what runs after the commit runs too)."""

    def mark(host) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            sync.mark_unreachable(host.pk, "connection refused")

    return mark


def lease_events(lease: Lease, kind: str) -> list[str]:
    return list(
        Event.objects.filter(lease_id=lease.pk, kind=kind).values_list("message", flat=True)
    )


def fresh(lease: Lease) -> Lease:
    return Lease.objects.get(pk=lease.pk)


def test_a_failed_hosts_reservation_moves_to_another_reservable_host(
    reservable_hosts, make_lease, fail
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    assert allocations_of(lease) == {first.name: 2}

    fail(first)

    assert allocations_of(lease) == {second.name: 2}
    assert not fresh(lease).degraded
    assert lease_events(lease, EventKind.CHANGED)[-1] == (
        f"Lease {lease.name}: capacity moved as host {first.name} is not responding: "
        f"reservation {lease.reservations.get().pk} now also holds 2 instances on {second.name}."
    )


def test_launches_follow_the_moved_capacity(reservable_hosts, make_lease, fail):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))

    fail(first)

    assert reservations.reserved_slots(lease.reservations.get()) == {second.pk: 2}


def test_capacity_moves_to_a_host_that_is_busy_only_at_other_times(
    reservable_hosts, make_lease, fail
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(PER_HOST, affinity=True))
    make_lease(at(12), at(15), instances(PER_HOST, affinity=True))

    fail(first)

    assert allocations_of(lease) == {second.name: PER_HOST}
    assert not fresh(lease).degraded


def test_a_spread_reservation_moves_only_off_the_failed_host(reservable_hosts, make_lease, fail):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(5))
    assert allocations_of(lease) == {first.name: 3, second.name: 2}
    [third] = reservable_hosts(1)

    fail(first)

    held = allocations_of(lease)
    assert first.name not in held
    assert sum(held.values()) == 5
    assert set(held) <= {second.name, third.name}


def test_a_lease_whose_capacity_cannot_move_is_degraded_with_an_alert(
    reservable_hosts, make_lease, fail
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(PER_HOST, affinity=True), name="stuck")
    make_lease(at(10), at(11), instances(1))

    fail(first)

    reservation = lease.reservations.get()
    assert fresh(lease).degraded
    assert (reservation.missing, reservation.missing_since) == (PER_HOST, at(9))
    assert allocations_of(lease) == {first.name: PER_HOST}  # held there for its return
    assert lease_events(lease, EventKind.ALERT) == [
        f"Lease stuck is degraded: reservation {reservation.pk} is 3 of 3 instances short from "
        f"{at(9):%Y-%m-%d} 09:00 (host {first.name} is not responding); no free reservable "
        "capacity can take them."
    ]


def test_a_degraded_lease_shows_as_degraded_to_its_owner(
    reservable_hosts, make_lease, fail, client_for
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), instances(1))

    fail(host)

    shown = client_for(lease.owner).get(f"/api/leases/{lease.pk}/").json()
    assert (shown["degraded"], shown["status"]) == (True, LeaseStatus.PENDING)


def test_a_whole_host_reservation_moves_to_a_free_host(reservable_hosts, make_lease, fail):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), whole_hosts(1))
    assert allocations_of(lease) == {first.name: 0}

    fail(first)

    assert allocations_of(lease) == {second.name: 0}
    assert not fresh(lease).degraded


def test_a_whole_host_reservation_with_no_free_host_left_is_degraded(
    reservable_hosts, make_lease, fail
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), whole_hosts(1))
    make_lease(at(11), at(13), instances(1))

    fail(first)

    assert fresh(lease).degraded


def test_an_active_lease_moves_too(reservable_hosts, make_lease, fail):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    lifecycle.start_lease(lease)

    fail(first)

    assert allocations_of(lease) == {second.name: 2}


def test_an_ended_lease_is_left_alone(reservable_hosts, make_lease, fail):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    lifecycle.end_lease(lease)
    seen = Event.objects.filter(lease_id=lease.pk).count()

    fail(first)

    assert allocations_of(lease) == {first.name: 2}
    assert Event.objects.filter(lease_id=lease.pk).count() == seen


def test_a_host_failing_again_moves_nothing_twice(reservable_hosts, make_lease, fail):
    first, second, third = reservable_hosts(3)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    fail(first)
    moved_to = allocations_of(lease)

    fail(first)

    assert allocations_of(lease) == moved_to
    assert len(lease_events(lease, EventKind.CHANGED)) == 2  # accepted, moved
