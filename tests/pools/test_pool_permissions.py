"""Who may do what with a pool: PoolAdmin manages it, UserRole takes VMs from it, others do not
find it."""

import pytest

from hosts.models import VirtualMachine
from pools.models import VmPool
from project.access.grants import grant_role
from tests.conftest import unique
from tests.pools.fixtures import pool_vms

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(pool_of):
    return pool_of(up=2, down=2, prestarted_vms=1)


@pytest.fixture
def holder(make_user, grant, client_for):
    """holder(role, obj) -> a client for a user holding ``role`` on ``obj``."""

    def make(role: str, obj):
        user = make_user()
        grant(user, role, obj)
        client = client_for(user)
        client.user = user
        return client

    return make


def _allocate(client, pool):
    return client.post(f"/api/vmpools/{pool.pk}/allocatevm/")


# -- PoolAdmin ---------------------------------------------------------------------------------


def test_pool_admin_sees_the_pool_with_its_counts(pool, holder):
    client = holder("PoolAdmin", pool)

    response = client.get(f"/api/vmpools/{pool.pk}/")

    assert response.status_code == 200
    assert response.json()["counts"]["total"] == 4


def test_pool_admin_resizes_the_pool(pool, holder):
    client = holder("PoolAdmin", pool)

    response = client.patch(f"/api/vmpools/{pool.pk}/", {"size": 5}, format="json")

    assert response.status_code == 200, response.json()
    assert len(pool_vms(pool)) == 5


def test_pool_admin_deletes_the_pool(pool, holder):
    client = holder("PoolAdmin", pool)

    response = client.delete(f"/api/vmpools/{pool.pk}/")

    assert response.status_code == 204
    assert not VmPool.objects.filter(pk=pool.pk).exists()


def test_deleting_a_pool_is_said_in_the_event_feed_to_the_clusters_admins(
    pool, holder, make_user, grant, client_for
):
    cluster_admin = make_user()
    grant(cluster_admin, "ClusterAdmin", pool.cluster)

    holder("PoolAdmin", pool).delete(f"/api/vmpools/{pool.pk}/")

    said = [
        (e["object_type"], e["object_id"], e["message"])
        for e in client_for(cluster_admin).get("/api/events/").json()["events"]
    ]
    assert ("pool", pool.pk, f"Pool {pool.name} deleted") in said


def test_pool_admin_grants_users_the_use_of_the_pool(pool, holder, make_user):
    client = holder("PoolAdmin", pool)
    user = make_user()

    response = client.post(
        "/api/permissions/",
        {"role": "UserRole", "user": user.username, "object_type": "pool", "object_id": pool.pk},
        format="json",
    )

    assert response.status_code == 201, response.json()


def test_pool_admin_of_one_pool_does_not_find_another(pool, pool_of, holder):
    client = holder("PoolAdmin", pool_of(down=1))

    assert client.get(f"/api/vmpools/{pool.pk}/").status_code == 404
    assert client.patch(f"/api/vmpools/{pool.pk}/", {"size": 5}, format="json").status_code == 404
    assert len(pool_vms(pool)) == 4


def test_cluster_admin_creates_a_pool_in_the_cluster(holder, make_cluster, make_template):
    cluster = make_cluster()
    template = make_template(cluster=cluster)
    client = holder("ClusterAdmin", cluster)

    response = client.post(
        "/api/vmpools/",
        {"name": unique("lab"), "cluster": cluster.pk, "template": template.pk, "size": 2},
        format="json",
    )

    assert response.status_code == 201, response.json()
    assert response.json()["counts"]["total"] == 2


def test_creating_a_pool_is_said_in_the_event_feed_to_the_clusters_admins(
    holder, make_cluster, make_template, make_user, grant, client_for
):
    cluster, elsewhere = make_cluster(), make_cluster()
    template = make_template(cluster=cluster)
    other_admin, admin_elsewhere = make_user(), make_user()
    grant(other_admin, "ClusterAdmin", cluster)
    grant(admin_elsewhere, "ClusterAdmin", elsewhere)
    name = unique("lab")

    response = holder("ClusterAdmin", cluster).post(
        "/api/vmpools/",
        {"name": name, "cluster": cluster.pk, "template": template.pk, "size": 2},
        format="json",
    )

    assert response.status_code == 201, response.json()
    pool_id = response.json()["id"]
    said = [
        (e["object_type"], e["object_id"], e["message"])
        for e in client_for(other_admin).get("/api/events/").json()["events"]
    ]
    assert ("pool", pool_id, f"Pool {name} created with 2 VM(s)") in said
    unseen = client_for(admin_elsewhere).get("/api/events/").json()["events"]
    assert [e for e in unseen if e["object_type"] == "pool"] == []


# -- UserRole: taking VMs ------------------------------------------------------------------------


def test_user_role_on_a_pool_lets_the_user_take_a_vm_from_it(pool, holder):
    client = holder("UserRole", pool)

    response = _allocate(client, pool)

    assert response.status_code == 200, response.json()
    assert VirtualMachine.objects.get(pk=response.json()["vm"]["id"]).owner == client.user


def test_user_role_on_a_pool_lets_the_user_see_the_pool_but_not_change_it(pool, holder):
    client = holder("UserRole", pool)

    assert client.get(f"/api/vmpools/{pool.pk}/").status_code == 200
    assert client.patch(f"/api/vmpools/{pool.pk}/", {"size": 9}, format="json").status_code == 403
    assert client.delete(f"/api/vmpools/{pool.pk}/").status_code == 403
    pool.refresh_from_db()
    assert pool.size == 4


def test_user_role_on_one_pool_does_not_reach_another(pool, pool_of, holder):
    client = holder("UserRole", pool_of(up=1))

    response = _allocate(client, pool)

    assert response.status_code == 404
    assert not VirtualMachine.objects.filter(owner__isnull=False).exists()


def test_the_pool_list_shows_a_pool_user_only_their_pools(pool, pool_of, holder):
    other = pool_of(up=1)
    client = holder("UserRole", pool)

    listed = [row["id"] for row in client.get("/api/vmpools/").json()["results"]]

    assert listed == [pool.pk]
    assert other.pk not in listed


def test_a_role_without_the_allocate_action_may_see_the_pool_but_not_take_from_it(
    pool, make_user, client_for, make_role
):
    user = make_user()
    grant_role(make_role("PoolViewer", ["pools.view_vmpool"]), pool, user=user)

    response = _allocate(client_for(user), pool)

    assert response.status_code == 403
    assert not VirtualMachine.objects.filter(owner__isnull=False).exists()


# -- no grant, another cluster -------------------------------------------------------------------


def test_a_user_without_a_grant_gets_404_on_the_pool(pool, make_user, client_for):
    client = client_for(make_user())

    assert client.get(f"/api/vmpools/{pool.pk}/").status_code == 404
    assert _allocate(client, pool).status_code == 404
    assert client.delete(f"/api/vmpools/{pool.pk}/").status_code == 404
    assert VmPool.objects.filter(pk=pool.pk).exists()


def test_cluster_admin_of_another_cluster_gets_404_on_the_pool(pool, holder, make_cluster):
    client = holder("ClusterAdmin", make_cluster())

    assert client.get(f"/api/vmpools/{pool.pk}/").status_code == 404
    assert _allocate(client, pool).status_code == 404
    assert client.patch(f"/api/vmpools/{pool.pk}/", {"size": 9}, format="json").status_code == 404
    assert client.delete(f"/api/vmpools/{pool.pk}/").status_code == 404
    pool.refresh_from_db()
    assert pool.size == 4


def test_cluster_admin_of_the_pools_cluster_manages_it(pool, holder):
    client = holder("ClusterAdmin", pool.cluster)

    response = client.patch(f"/api/vmpools/{pool.pk}/", {"max_user_vms": 2}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["max_user_vms"] == 2


def test_pool_admin_of_a_cluster_creates_a_pool_there(holder, make_cluster, make_template):
    cluster = make_cluster()
    template = make_template(cluster=cluster)
    client = holder("PoolAdmin", cluster)

    response = client.post(
        "/api/vmpools/",
        {"name": unique("lab"), "cluster": cluster.pk, "template": template.pk, "size": 2},
        format="json",
    )

    assert response.status_code == 201, response.json()
