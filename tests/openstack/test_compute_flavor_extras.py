"""A flavor's extra specs and access list: a reservation's flavor carries Blazar's specs and
belongs to its owner's project; a template's has none and is public."""

from __future__ import annotations

import pytest
import time_machine

from leases import lifecycle
from openstack.compute.group_ids import reservation_group_id
from tests.leases.fixtures import at, instances
from tests.openstack.conftest import nova_get

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"


@pytest.fixture
def reservation_flavor(make_lease, lease_user, reservable_hosts):
    reservable_hosts(2)
    owner = lease_user()
    lease = make_lease(at(10), at(12), instances(2, affinity=True), owner=owner)
    with time_machine.travel(at(10), tick=False):
        lifecycle.start_lease(lease)
    return owner, lease.reservations.get()


def test_a_reservations_flavor_has_blazars_extra_specs(nova_for, reservation_flavor):
    owner, reservation = reservation_flavor
    nova = nova_for(owner)

    specs = nova_get(nova, f"{V}/flavors/{reservation.pk}/os-extra_specs")["extra_specs"]
    one = nova_get(nova, f"{V}/flavors/{reservation.pk}/os-extra_specs/affinity_id")
    unknown = nova.get(f"{V}/flavors/{reservation.pk}/os-extra_specs/hw:cpu_policy")

    assert specs == {
        "aggregate_instance_extra_specs:reservation": str(reservation.pk),
        "affinity_id": reservation_group_id(reservation),
    }
    assert one == {"affinity_id": reservation_group_id(reservation)}
    assert unknown.status_code == 404
    assert unknown.json()["itemNotFound"]["message"] == (
        f"Flavor {reservation.pk} has no extra specs with key hw:cpu_policy."
    )


def test_a_templates_flavor_has_no_extra_specs(
    nova_for, make_user, make_template, make_cluster, grant
):
    user = make_user()
    cluster = make_cluster()
    make_template("small", cluster=cluster)
    grant(user, "PowerUser", cluster)

    specs = nova_get(nova_for(user), f"{V}/flavors/small/os-extra_specs")

    assert specs == {"extra_specs": {}}


def test_setting_extra_specs_is_refused_by_policy_for_users_and_as_a_conflict_for_admins(
    nova_for, reservation_flavor, admin_user
):
    owner, reservation = reservation_flavor
    path = f"{V}/flavors/{reservation.pk}/os-extra_specs"
    body = {"extra_specs": {"hw:cpu_policy": "dedicated"}}

    by_owner = nova_for(owner).post(path, body, format="json")
    by_admin = nova_for(admin_user).post(path, body, format="json")
    deleted = nova_for(admin_user).delete(f"{path}/affinity_id")

    assert by_owner.status_code == 403
    assert by_owner.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-flavor-extra-specs:create to be performed."
    )
    assert by_admin.status_code == deleted.status_code == 409
    assert by_admin.json()["conflictingRequest"]["message"] == (
        f"Flavor {reservation.pk}'s extra specs cannot be changed: Corral derives them from its "
        "template or reservation."
    )


def test_a_reservations_flavor_access_is_its_owners_project_for_admins(
    nova_for, reservation_flavor, admin_user, make_template
):
    owner, reservation = reservation_flavor
    make_template("small")
    nova = nova_for(admin_user)

    access = nova_get(nova, f"{V}/flavors/{reservation.pk}/os-flavor-access")
    public = nova.get(f"{V}/flavors/small/os-flavor-access")
    refused = nova_for(owner).get(f"{V}/flavors/{reservation.pk}/os-flavor-access")

    assert access == {
        "flavor_access": [{"flavor_id": str(reservation.pk), "tenant_id": str(owner.pk)}]
    }
    assert public.status_code == 404
    assert public.json()["itemNotFound"]["message"] == (
        "Access list not available for public flavors."
    )
    assert refused.status_code == 403
