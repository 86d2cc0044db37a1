"""Nova's server groups: Corral's affinity groups (made in the first cluster where the caller
may add them) and the groups instance reservations with an affinity rule stand for."""

from __future__ import annotations

import pytest
import time_machine
from rest_framework.exceptions import PermissionDenied

from hosts.models import Cluster
from leases import lifecycle
from openstack.compute.base import Conflict
from openstack.compute.group_ids import affinity_group_id, reservation_group_id
from openstack.compute.queries import find_group
from openstack.compute.services import add_member
from openstack.models import NovaServerGroup
from project.access.permissions import permission_for
from project.access.roles import ensure_grant_permissions
from project.models import Role
from scheduling.models import AffinityGroup
from tests.leases.fixtures import at, instances
from tests.openstack.conftest import nova_get

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"
GROUPS = f"{V}/os-server-groups"


def create(client, name: str, policies, version: str = "2.1"):
    return client.post(
        GROUPS,
        {"server_group": {"name": name, "policies": policies}},
        format="json",
        HTTP_OPENSTACK_API_VERSION=f"compute {version}",
    )


@pytest.fixture
def cluster_admin(make_user, make_cluster, grant):
    """A user who may add affinity groups in clusters b-cluster and a-cluster."""
    user = make_user()
    for name in ("b-cluster", "a-cluster"):
        grant(user, "ClusterAdmin", make_cluster(name))
    return user


def test_creating_a_server_group_makes_an_affinity_group_in_the_first_cluster_by_name(
    nova_for, cluster_admin
):
    made = create(nova_for(cluster_admin), "web servers", ["anti-affinity"])

    assert made.status_code == 200
    group = AffinityGroup.objects.get()
    body = made.json()["server_group"]
    assert body == {
        "id": affinity_group_id(group),
        "name": "web servers",
        "policies": ["anti-affinity"],
        "members": [],
        "metadata": {},
    }
    assert (group.cluster.name, group.name, group.vm_rule, group.vm_enforcing) == (
        "a-cluster",
        "web-servers",
        "negative",
        True,
    )
    assert NovaServerGroup.objects.get().user == cluster_admin


def test_names_may_repeat_in_nova_and_get_unique_corral_names(nova_for, cluster_admin):
    nova = nova_for(cluster_admin)

    first = create(nova, "g1", ["affinity"]).json()["server_group"]
    second = create(nova, "g1", ["affinity"]).json()["server_group"]
    odd = create(nova, "../ weird ✓", ["affinity"]).json()["server_group"]

    assert first["name"] == second["name"] == "g1"
    assert first["id"] != second["id"]
    assert sorted(AffinityGroup.objects.values_list("name", flat=True)) == [
        "g1",
        "g1-2",
        "weird",
    ]
    assert odd["name"] == "../ weird ✓"


def test_soft_policies_need_2_15_and_are_groups_that_do_not_enforce(nova_for, cluster_admin):
    nova = nova_for(cluster_admin)

    old = create(nova, "soft", ["soft-affinity"], "2.14")
    new = create(nova, "soft", ["soft-affinity"], "2.15")

    assert old.status_code == 400
    assert old.json()["badRequest"]["message"] == (
        "Invalid input for field/attribute policies: Give one policy in a list, one of: "
        "anti-affinity, affinity."
    )
    assert new.json()["server_group"]["policies"] == ["soft-affinity"]
    group = AffinityGroup.objects.get()
    assert (group.vm_rule, group.vm_enforcing) == ("positive", False)


def test_bad_bodies_are_400s_naming_the_field(nova_for, cluster_admin):
    nova = nova_for(cluster_admin)

    no_name = nova.post(GROUPS, {"server_group": {"policies": ["affinity"]}}, format="json")
    two = create(nova, "g", ["affinity", "anti-affinity"])
    spaced = create(nova, " g", ["affinity"])
    extra = nova.post(
        GROUPS,
        {"server_group": {"name": "g", "policies": ["affinity"], "rules": {}}},
        format="json",
    )

    assert no_name.status_code == two.status_code == spaced.status_code == extra.status_code == 400
    assert "field/attribute name" in no_name.json()["badRequest"]["message"]
    assert "field/attribute policies" in two.json()["badRequest"]["message"]
    assert "field/attribute name" in spaced.json()["badRequest"]["message"]
    assert "field/attribute rules" in extra.json()["badRequest"]["message"]
    assert not AffinityGroup.objects.exists()


def test_a_user_who_may_create_servers_and_add_affinity_groups_nowhere_is_refused(
    nova_for, make_user, make_cluster, grant
):
    user = make_user()
    grant(user, "UserRole", make_cluster())  # uses the VMs granted to it, creates none

    refused = create(nova_for(user), "g", ["affinity"])

    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-server-groups:create to be performed."
    )
    assert not AffinityGroup.objects.exists()


@pytest.fixture
def power_users(make_user, make_cluster, grant):
    """Two PowerUsers of cluster b-cluster (they may create servers there, nothing more)."""
    cluster = make_cluster("b-cluster")
    make_cluster("a-cluster")
    users = make_user(), make_user()
    for user in users:
        grant(user, "PowerUser", cluster)
    return users


def test_a_user_who_may_create_servers_makes_a_group_where_their_servers_boot(
    nova_for, power_users
):
    maker, _ = power_users

    made = create(nova_for(maker), "web", ["anti-affinity"], "2.13")

    assert made.status_code == 200
    group = AffinityGroup.objects.get()
    assert made.json()["server_group"]["user_id"] == str(maker.pk)
    assert (group.cluster.name, group.vm_rule) == ("b-cluster", "negative")
    assert NovaServerGroup.objects.get().user == maker


def test_the_maker_of_a_group_shows_uses_and_deletes_it_and_others_get_404s(
    nova_for, power_users, make_vm
):
    maker, neighbour = power_users
    nova = nova_for(maker)
    group_id = create(nova, "web", ["affinity"]).json()["server_group"]["id"]
    url = f"{GROUPS}/{group_id}"

    shown = nova_get(nova, url)["server_group"]
    listed = nova_get(nova, GROUPS)["server_groups"]
    theirs = nova_get(nova_for(neighbour), GROUPS)["server_groups"]
    hidden = nova_for(neighbour).get(url)
    not_theirs = nova_for(neighbour).delete(url)
    found = find_group(maker, group_id)
    vm = make_vm(cluster=found.affinity_group.cluster, owner=maker)
    add_member(found, vm)  # what booting a server into the group does
    members = nova_get(nova, url)["server_group"]["members"]
    deleted = nova.delete(url)

    assert shown["name"] == "web"
    assert [g["id"] for g in listed] == [group_id]
    assert theirs == []
    assert (hidden.status_code, not_theirs.status_code) == (404, 404)
    assert members == [str(vm.uuid)]
    assert deleted.status_code == 204
    assert not AffinityGroup.objects.exists()


def test_groups_are_listed_shown_and_deleted_as_their_affinity_groups_allow(
    nova_for, cluster_admin, make_user, make_vm
):
    nova = nova_for(cluster_admin)
    made = create(nova, "g1", ["affinity"], "2.13").json()["server_group"]
    group = AffinityGroup.objects.get()
    vm = make_vm(cluster=group.cluster)
    group.vms.add(vm)
    stranger = make_user()

    listed = nova_get(nova, GROUPS)["server_groups"]
    shown = nova_get(nova, f"{GROUPS}/{made['id']}")["server_group"]
    hidden = nova_for(stranger).get(f"{GROUPS}/{made['id']}")
    deleted = nova.delete(f"{GROUPS}/{made['id']}")

    assert made["user_id"] == made["project_id"] == str(cluster_admin.pk)
    assert [g["id"] for g in listed] == [made["id"]]
    assert shown["members"] == [str(vm.uuid)]
    assert hidden.status_code == 404
    assert hidden.json()["itemNotFound"]["message"] == (
        f"Instance group {made['id']} could not be found."
    )
    assert nova_get(nova_for(stranger), GROUPS)["server_groups"] == []
    assert deleted.status_code == 204
    assert not AffinityGroup.objects.exists()


def test_an_affinity_group_made_in_corral_is_a_server_group_with_its_name(nova_for, cluster_admin):
    cluster = Cluster.objects.get(name="a-cluster")
    group = AffinityGroup.objects.create(
        cluster=cluster, name="db", vm_rule="negative", vm_enforcing=False
    )

    shown = nova_get(nova_for(cluster_admin), f"{GROUPS}/{affinity_group_id(group)}")

    assert shown["server_group"]["name"] == "db"
    assert shown["server_group"]["policies"] == ["soft-anti-affinity"]


def test_an_unknown_group_id_is_novas_404(nova_for, cluster_admin):
    response = nova_for(cluster_admin).get(f"{GROUPS}/nosuch")

    assert response.status_code == 404


@pytest.fixture
def reservation_group(make_lease, lease_user, reservable_hosts, make_vm):
    """An active lease of ``owner`` with an anti-affinity instance reservation and one VM."""
    hosts = reservable_hosts(2)
    owner = lease_user()
    lease = make_lease(at(10), at(12), instances(2, affinity=False), owner=owner)
    reservation = lease.reservations.get()
    with time_machine.travel(at(10), tick=False):
        lifecycle.start_lease(lease)
    vm = make_vm(cluster=hosts[0].cluster, owner=owner, reservation=reservation)
    return owner, reservation, vm


def test_a_reservation_with_an_affinity_rule_is_its_owners_server_group(
    nova_for, reservation_group, lease_user
):
    owner, reservation, vm = reservation_group
    group_id = reservation_group_id(reservation)

    listed = nova_get(nova_for(owner), GROUPS)["server_groups"]
    others = nova_get(nova_for(lease_user()), GROUPS)["server_groups"]
    refused = nova_for(owner).delete(f"{GROUPS}/{group_id}")

    assert listed == [
        {
            "id": group_id,
            "name": f"reservation:{reservation.pk}",
            "policies": ["anti-affinity"],
            "members": [str(vm.uuid)],
            "metadata": {},
        }
    ]
    assert others == []
    assert refused.status_code == 409
    assert refused.json()["conflictingRequest"]["message"].startswith(
        f"Server group {group_id} is reservation {reservation.pk}'s"
    )


def test_find_group_finds_both_kinds_and_add_member_puts_a_vm_in_an_affinity_group(
    reservation_group, cluster_admin, make_vm, make_user
):
    owner, reservation, vm = reservation_group
    made = find_group(owner, reservation_group_id(reservation))
    cluster = Cluster.objects.get(name="a-cluster")
    group = AffinityGroup.objects.create(cluster=cluster, name="ag")
    found = find_group(cluster_admin, affinity_group_id(group).upper())
    inside, outside = make_vm(cluster=cluster), make_vm()

    add_member(made, vm)
    add_member(found, inside)

    assert (made.reservation, made.affinity_group, made.policy) == (
        reservation,
        None,
        "anti-affinity",
    )
    assert (found.affinity_group, found.reservation, found.policy) == (group, None, "anti-affinity")
    assert list(group.vms.all()) == [inside]
    assert found.members == [str(inside.uuid)]
    assert find_group(make_user(), affinity_group_id(group)) is None
    with pytest.raises(Conflict, match="is not in it"):
        add_member(found, outside)


def test_add_member_is_refused_without_the_right_to_change_the_group(
    make_user, make_cluster, grant, make_vm
):
    viewer = make_user()
    cluster = make_cluster()
    role = Role.objects.create(name="GroupViewer")
    role.actions.set([permission_for("scheduling.view_affinitygroup")])
    ensure_grant_permissions(role)
    grant(viewer, "GroupViewer", cluster)
    group = AffinityGroup.objects.create(cluster=cluster, name="ag")
    found = find_group(viewer, affinity_group_id(group))

    assert found is not None
    with pytest.raises(PermissionDenied):
        add_member(found, make_vm(cluster=cluster))
    assert not group.vms.exists()
