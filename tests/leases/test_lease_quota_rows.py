"""What a user's leases may reserve at once is part of Corral's quotas: the default row, a
group's row and the user's own set it by the quota rules (the most generous applies), the
``LEASE_QUOTA_*`` settings are the defaults where no default row sets one, and the caller sees
their limits in ``GET /api/me/quota/``."""

import pytest
from django.contrib.auth.models import Group

from hosts.models import Quota
from leases.models import Lease
from tests.leases.fixtures import at, instances
from tests.leases.test_leases_api import body_for, create

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(lease_user):
    return lease_user()


@pytest.fixture
def client(owner, client_for):
    return client_for(owner)


def refusal(client, amount: int):
    return client.post(
        "/api/leases/", body_for(instances(amount), start=at(11), end=at(13)), format="json"
    )


def test_the_default_row_sets_everyones_lease_limit_over_the_setting(
    client, reservable_hosts, settings
):
    settings.LEASE_QUOTA_INSTANCES = 10
    Quota.objects.create(lease_instances=2)
    reservable_hosts(2)
    create(client, body_for(instances(2), start=at(9), end=at(12)))

    response = refusal(client, 1)

    assert response.status_code == 409
    assert response.json() == {
        "detail": "Your leases would hold 3 instances at once; your quota is 2 instances."
    }
    assert Lease.objects.count() == 1


def test_a_groups_row_gives_its_users_more_than_the_setting(
    client, owner, reservable_hosts, settings
):
    settings.LEASE_QUOTA_VCPUS = 1
    group = Group.objects.create(name="lab-staff")
    owner.groups.add(group)
    Quota.objects.create(group=group, lease_vcpus=3)
    reservable_hosts(2)

    three = create(client, body_for(instances(3), start=at(9), end=at(12)))
    response = refusal(client, 1)

    assert three["status"] == "PENDING"
    assert response.status_code == 409
    assert response.json() == {
        "detail": "Your leases would hold 4 vCPUs at once; your quota is 3 vCPUs."
    }


def test_a_users_row_of_unlimited_lifts_the_setting(client, owner, reservable_hosts, settings):
    settings.LEASE_QUOTA_INSTANCES = 1
    Quota.objects.create(user=owner, lease_instances=-1)
    reservable_hosts(2)

    lease = create(client, body_for(instances(4), start=at(9), end=at(12)))

    assert lease["status"] == "PENDING"


def test_a_setting_of_zero_is_no_limit_but_a_row_of_zero_is_none_at_all(
    client, reservable_hosts, settings
):
    settings.LEASE_QUOTA_INSTANCES = 0
    reservable_hosts(2)
    create(client, body_for(instances(3), start=at(9), end=at(10)))
    Quota.objects.create(lease_instances=0)

    response = refusal(client, 1)

    assert response.status_code == 409
    assert response.json() == {
        "detail": "Your leases would hold 1 instance at once; your quota is 0 instances."
    }


def test_the_caller_sees_their_lease_limits(client, owner, settings):
    settings.LEASE_QUOTA_INSTANCES = 4
    settings.LEASE_QUOTA_VCPUS = 0
    settings.LEASE_QUOTA_MEMORY_MB = 8192
    Quota.objects.create(user=owner, lease_memory_mb=16384)

    response = client.get("/api/me/quota/")

    assert response.status_code == 200
    assert response.json()["leases"] == {"instances": 4, "vcpus": None, "memory_mb": 16384}
