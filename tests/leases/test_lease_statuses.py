"""The statuses a lease takes, and only those in the API. Blazar also names STARTING, UPDATING
and TERMINATING, for the time its start, update and end take; Corral starts, changes and ends
a lease each in one transaction, so they never occur and are not offered. ERROR is what a
lease event that failed leaves."""

import pytest

from leases import lifecycle, services
from leases.models import Lease, LeaseStatus
from tests.leases.fixtures import at, instances

pytestmark = pytest.mark.django_db


def _status(lease: Lease) -> str:
    return Lease.objects.get(pk=lease.pk).status


def test_the_api_offers_only_the_statuses_a_lease_takes(admin_user, client_for):
    schema = client_for(admin_user).get("/api/schema/", {"format": "json"}).json()

    assert schema["components"]["schemas"]["LeaseStatusEnum"]["enum"] == [
        "PENDING",
        "ACTIVE",
        "TERMINATED",
        "ERROR",
    ]


def test_a_lease_goes_from_pending_to_active_to_terminated_as_its_events_run(
    reservable_hosts, make_lease, admin_user, client_for
):
    reservable_hosts(1)
    lease = make_lease(at(9), at(12), instances(1))
    seen = [_status(lease)]
    changed = services.update_lease(lease, {"end": at(13)})
    seen.append(_status(changed))

    lifecycle.run_due_events(now=at(9))
    seen.append(_status(lease))
    lifecycle.run_due_events(now=at(13))
    seen.append(_status(lease))

    assert seen == [
        LeaseStatus.PENDING,
        LeaseStatus.PENDING,  # a change leaves it as it was: no UPDATING
        LeaseStatus.ACTIVE,
        LeaseStatus.TERMINATED,
    ]
    shown = client_for(admin_user).get(f"/api/leases/{lease.pk}/").json()
    assert shown["status"] == "TERMINATED"
