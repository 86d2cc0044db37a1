"""Moving an object through the API is creating it where it lands.

An update that changes where an object lives (its cluster, or no cluster for a shared template)
needs the add and change actions at the destination, as creating it there would. The callers
here are ClusterAdmin of the object's own cluster A and PowerUser of cluster B: they see B (so
naming it is not a 400) but may not add hosts or templates in it.
"""

from __future__ import annotations

import pytest

from hosts.models import Host, Template, VirtualMachine
from pools.models import VmPool

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster_a(make_cluster):
    return make_cluster("move-a")


@pytest.fixture
def cluster_b(make_cluster):
    return make_cluster("move-b")


@pytest.fixture
def admin_of_a_user_of_b(make_user, grant, cluster_a, cluster_b):
    user = make_user()
    grant(user, "ClusterAdmin", cluster_a)
    grant(user, "PowerUser", cluster_b)
    return user


@pytest.fixture
def admin_of_both(make_user, grant, cluster_a, cluster_b):
    user = make_user()
    grant(user, "ClusterAdmin", cluster_a)
    grant(user, "ClusterAdmin", cluster_b)
    return user


def _detail(response) -> str:
    return response.json()["detail"]


def test_moving_a_host_to_a_cluster_seen_but_not_managed_is_refused(
    client_for, admin_of_a_user_of_b, make_host, cluster_a, cluster_b
):
    host = make_host(cluster_a, description="rack 1")

    response = client_for(admin_of_a_user_of_b).patch(
        f"/api/hosts/{host.pk}/", {"cluster": cluster_b.pk, "description": "rack 2"}, format="json"
    )

    assert response.status_code == 403, response.content
    assert "move-b" in _detail(response)
    host = Host.objects.get(pk=host.pk)
    assert (host.cluster_id, host.description) == (cluster_a.pk, "rack 1")


def test_moving_a_host_between_two_managed_clusters_is_allowed(
    client_for, admin_of_both, make_host, cluster_a, cluster_b
):
    host = make_host(cluster_a)

    response = client_for(admin_of_both).patch(
        f"/api/hosts/{host.pk}/", {"cluster": cluster_b.pk}, format="json"
    )

    assert response.status_code == 200, response.content
    assert Host.objects.get(pk=host.pk).cluster_id == cluster_b.pk


def test_editing_a_host_in_place_needs_no_right_elsewhere(
    client_for, admin_of_a_user_of_b, make_host, cluster_a
):
    host = make_host(cluster_a)

    response = client_for(admin_of_a_user_of_b).patch(
        f"/api/hosts/{host.pk}/", {"cluster": cluster_a.pk, "description": "rack 9"}, format="json"
    )

    assert response.status_code == 200, response.content
    assert Host.objects.get(pk=host.pk).description == "rack 9"


def test_moving_a_template_to_a_cluster_seen_but_not_managed_is_refused(
    client_for, admin_of_a_user_of_b, make_template, cluster_a, cluster_b
):
    template = make_template(cluster=cluster_a)

    response = client_for(admin_of_a_user_of_b).patch(
        f"/api/templates/{template.pk}/", {"cluster": cluster_b.pk}, format="json"
    )

    assert response.status_code == 403, response.content
    assert "move-b" in _detail(response)
    assert Template.objects.get(pk=template.pk).cluster_id == cluster_a.pk


def test_sharing_a_template_with_every_cluster_needs_a_system_wide_grant(
    client_for, admin_of_a_user_of_b, make_template, cluster_a
):
    template = make_template(cluster=cluster_a, vcpus=2)

    response = client_for(admin_of_a_user_of_b).patch(
        f"/api/templates/{template.pk}/", {"cluster": None, "vcpus": 4}, format="json"
    )

    assert response.status_code == 403, response.content
    assert "shared by every cluster" in _detail(response)
    template = Template.objects.get(pk=template.pk)
    assert (template.cluster_id, template.vcpus) == (cluster_a.pk, 2)


def test_a_system_wide_cluster_admin_may_share_a_template(
    client_for, make_user, grant, make_template, cluster_a
):
    user = make_user()
    grant(user, "ClusterAdmin")
    template = make_template(cluster=cluster_a)

    response = client_for(user).patch(
        f"/api/templates/{template.pk}/", {"cluster": None}, format="json"
    )

    assert response.status_code == 200, response.content
    assert Template.objects.get(pk=template.pk).cluster_id is None


def test_a_vm_cannot_be_moved_to_another_cluster_through_the_api(
    client_for, admin_of_a_user_of_b, make_vm, cluster_a, cluster_b
):
    vm = make_vm(cluster_a)

    response = client_for(admin_of_a_user_of_b).patch(
        f"/api/vms/{vm.pk}/", {"cluster": cluster_b.pk}, format="json"
    )

    # The cluster is read-only after creation: the change is ignored, the VM stays where it was.
    assert (response.status_code, response.json()["cluster"]) == (200, cluster_a.pk)
    assert VirtualMachine.objects.get(pk=vm.pk).cluster_id == cluster_a.pk


def test_a_pool_cannot_be_moved_to_another_cluster_through_the_api(
    client_for, admin_of_a_user_of_b, make_pool, cluster_a, cluster_b
):
    pool = make_pool(cluster_a)

    response = client_for(admin_of_a_user_of_b).patch(
        f"/api/vmpools/{pool.pk}/", {"cluster": cluster_b.pk}, format="json"
    )

    # The cluster is read-only after creation: the change is ignored, the pool stays where it was.
    assert (response.status_code, response.json()["cluster"]) == (200, cluster_a.pk)
    assert VmPool.objects.get(pk=pool.pk).cluster_id == cluster_a.pk
