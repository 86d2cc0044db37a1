"""Changing a lease's dates keeps its warning the same distance before its end (never before its
start), unless the change gives a new warning time: a lease warned two hours before its end is
still warned two hours before the end it now has."""

import pytest
import time_machine

from leases import lifecycle, services
from leases.models import EventStatus, EventType, LeaseEvent
from project.models import Event, EventKind
from tests.leases.fixtures import at, instances

pytestmark = pytest.mark.django_db


def warning(lease) -> LeaseEvent:
    return LeaseEvent.objects.get(lease=lease, event_type=EventType.BEFORE_END)


@pytest.fixture
def lease(reservable_hosts, make_lease):
    """09:00 to 12:00, warned at 10:00: two hours before its end."""
    reservable_hosts(1)
    return make_lease(at(9), at(12), instances(1), before_end=at(10))


def test_extending_a_lease_moves_its_warning_with_the_end(lease, client_for):
    response = client_for(lease.owner).patch(
        f"/api/leases/{lease.pk}/", {"prolong_for": "3h"}, format="json"
    )

    assert response.status_code == 200, response.json()
    assert response.json()["before_end_date"].startswith(f"{at(13):%Y-%m-%dT%H:%M}")
    assert warning(lease).time == at(13)


def test_moving_a_pending_lease_moves_its_warning_the_same_distance(lease):
    services.update_lease(lease, {"start": at(9, day=1), "end": at(12, day=1)})

    lease.refresh_from_db()
    assert lease.before_end_date == at(10, day=1)
    assert warning(lease).time == at(10, day=1)


def test_a_warning_given_with_the_change_is_the_one_kept(lease):
    services.update_lease(lease, {"end": at(15), "before_end": at(14.5)})

    lease.refresh_from_db()
    assert lease.before_end_date == at(14.5)


def test_shortening_below_the_distance_warns_at_the_start(lease):
    services.update_lease(lease, {"end_shift": at(10.5) - at(12)})

    lease.refresh_from_db()
    assert (lease.end_date, lease.before_end_date) == (at(10.5), at(9))


def test_an_extended_running_lease_is_warned_again_before_its_new_end(lease):
    with time_machine.travel(at(9), tick=False):
        lifecycle.run_due_events()
    with time_machine.travel(at(10), tick=False):
        lifecycle.run_due_events()
        assert warning(lease).status == EventStatus.DONE
        services.update_lease(lease, {"end_shift": at(15) - at(12)})
    assert (warning(lease).time, warning(lease).status) == (at(13), EventStatus.UNDONE)

    with time_machine.travel(at(13), tick=False):
        assert lifecycle.run_due_events() == 1

    warnings = Event.objects.filter(lease_id=lease.pk, kind=EventKind.ALERT)
    assert list(warnings.order_by("pk").values_list("message", flat=True)) == [
        f"Lease {lease.name} ends at {at(12):%Y-%m-%d} 12:00; its VMs will be stopped then.",
        f"Lease {lease.name} ends at {at(15):%Y-%m-%d} 15:00; its VMs will be stopped then.",
    ]
