"""The admin console saves an object only where its user may put it.

A new object needs the add action where it will be; an object moved to another cluster (or a
template made shared by every cluster) needs the add and change actions there. The user here
is ClusterAdmin of cluster A and PowerUser of cluster B: B is offered in the forms (they see
it) but they may not put hosts, templates or other clusters' VMs there. A refusal is shown on
the form, and nothing is written.
"""

from __future__ import annotations

import pytest

from hosts.models import Host, Template, VirtualMachine
from pools.models import VmPool
from tests.project.admin.fixtures import admin_url, form_errors, logged_in, page_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_of_a_user_of_b(admin_of_a, grant, cluster_b):
    grant(admin_of_a, "PowerUser", cluster_b)
    return admin_of_a


@pytest.fixture
def console(admin_of_a_user_of_b):
    return logged_in(admin_of_a_user_of_b)


def test_moving_a_host_to_a_cluster_seen_but_not_managed_is_a_form_error(
    console, make_host, cluster_a, cluster_b
):
    host = make_host(cluster_a, description="rack 1")
    url = admin_url("hosts.Host", "change", host.pk)
    data = {**page_form(console, url), "cluster": cluster_b.pk, "description": "rack 2"}

    response = console.post(url, data)

    assert "You may not move this host to cluster cluster-b" in form_errors(response)
    host = Host.objects.get(pk=host.pk)
    assert (host.cluster_id, host.description) == (cluster_a.pk, "rack 1")


def test_adding_a_host_in_a_cluster_seen_but_not_managed_is_a_form_error(
    console, cluster_a, cluster_b
):
    url = admin_url("hosts.Host", "add")
    data = {
        **page_form(console, url),
        "name": "new-host",
        "cluster": cluster_b.pk,
        "uri": "qemu+ssh://root@new-host.example.org/system",
        "networks": "[]",
    }

    response = console.post(url, data)

    assert "You may not add a host in cluster cluster-b" in form_errors(response)
    assert not Host.objects.filter(name="new-host").exists()


def test_adding_a_host_in_a_managed_cluster_still_works(console, cluster_a):
    url = admin_url("hosts.Host", "add")
    data = {
        **page_form(console, url),
        "name": "new-host",
        "cluster": cluster_a.pk,
        "uri": "qemu+ssh://root@new-host.example.org/system",
        "networks": "[]",
    }

    response = console.post(url, data)

    assert response.status_code == 302, form_errors(response)
    assert Host.objects.get(name="new-host").cluster_id == cluster_a.pk


def test_adding_a_shared_template_needs_a_system_wide_grant(console, cluster_a):
    url = admin_url("hosts.Template", "add")
    data = {**page_form(console, url), "name": "everyone", "cluster": "", "networks": "[]"}

    response = console.post(url, data)

    assert "shared by every cluster" in form_errors(response)
    assert not Template.objects.filter(name="everyone").exists()


def test_making_a_template_shared_needs_a_system_wide_grant(console, make_template, cluster_a):
    template = make_template("tmpl-a", cluster=cluster_a)
    url = admin_url("hosts.Template", "change", template.pk)
    data = {**page_form(console, url), "cluster": ""}

    response = console.post(url, data)

    assert "You may not make this template shared by every cluster" in form_errors(response)
    assert Template.objects.get(pk=template.pk).cluster_id == cluster_a.pk


def test_a_superuser_adds_a_shared_template(superuser_console):
    url = admin_url("hosts.Template", "add")
    data = {**page_form(superuser_console, url), "name": "everyone", "cluster": ""}
    data.setdefault("networks", "[]")

    response = superuser_console.post(url, data)

    assert response.status_code == 302, form_errors(response)
    assert Template.objects.get(name="everyone").cluster_id is None


def test_a_vm_does_not_move_to_a_cluster_seen_but_not_managed(
    console, make_vm, make_template, cluster_a, cluster_b
):
    vm = make_vm(cluster_a, make_template("shared-tmpl"), name="vm-a")
    url = admin_url("hosts.VirtualMachine", "change", vm.pk)

    console.post(url, {**page_form(console, url), "cluster": cluster_b.pk})

    assert VirtualMachine.objects.get(pk=vm.pk).cluster_id == cluster_a.pk


def test_adding_a_vm_in_a_cluster_seen_without_the_add_right_is_a_form_error(
    make_user, grant, make_template, cluster_a, cluster_b
):
    user = make_user(is_staff=True)
    grant(user, "ClusterAdmin", cluster_a)
    grant(user, "PolicyAdmin", cluster_b)  # sees cluster B, may not make VMs there
    console = logged_in(user)
    template = make_template("shared-tmpl", vcpus=1, memory_mb=256, disk_gb=1)
    url = admin_url("hosts.VirtualMachine", "add")
    data = {
        **page_form(console, url),
        "name": "new-vm",
        "cluster": cluster_b.pk,
        "template": template.pk,
        "vcpus": 1,
        "memory_mb": 256,
        "disk_gb": 1,
    }

    response = console.post(url, data)

    assert "You may not add a virtual machine in cluster cluster-b" in form_errors(response)
    assert not VirtualMachine.objects.filter(name="new-vm").exists()


def test_adding_a_pool_in_a_cluster_seen_without_the_add_right_is_a_form_error(
    console, make_template, cluster_b
):
    template = make_template("shared-tmpl")
    url = admin_url("pools.VmPool", "add")
    data = {
        **page_form(console, url),
        "name": "new-pool",
        "cluster": cluster_b.pk,
        "template": template.pk,
        "size": 0,
        "prestarted_vms": 0,
    }

    response = console.post(url, data)

    assert "You may not add a VM pool in cluster cluster-b" in form_errors(response)
    assert not VmPool.objects.filter(name="new-pool").exists()


@pytest.fixture
def policy_admin_of_b(make_user, grant, cluster_a, cluster_b):
    """PolicyAdmin of B may open B's page (it changes B's policy); holding ClusterAdmin on A
    must not let it add or change B's hosts in the page's host rows."""
    user = make_user(is_staff=True)
    grant(user, "ClusterAdmin", cluster_a)
    grant(user, "PolicyAdmin", cluster_b)
    return logged_in(user)


def test_changing_a_host_in_another_clusters_page_needs_the_change_right_there(
    policy_admin_of_b, cluster_b, make_host
):
    host_b = make_host(cluster_b, name="host-b", description="rack 1")
    url = admin_url("hosts.Cluster", "change", cluster_b.pk)
    data = page_form(policy_admin_of_b, url)
    data["hosts-0-name"] = "renamed"

    response = policy_admin_of_b.post(url, data)

    assert response.status_code == 403
    assert Host.objects.get(pk=host_b.pk).name == "host-b"


def test_adding_a_host_through_another_clusters_page_needs_the_add_right_there(
    policy_admin_of_b, cluster_b, make_host
):
    host_b = make_host(cluster_b, name="host-b")
    console = policy_admin_of_b
    url = admin_url("hosts.Cluster", "change", cluster_b.pk)
    data = page_form(console, url)
    prefix = "hosts"
    rows = int(data[f"{prefix}-TOTAL_FORMS"])
    data.update(
        {
            f"{prefix}-TOTAL_FORMS": rows + 1,
            f"{prefix}-{rows}-name": "sneaked-in",
            f"{prefix}-{rows}-uri": "qemu+ssh://root@sneaked-in.example.org/system",
            f"{prefix}-{rows}-cluster": cluster_b.pk,
        }
    )

    response = console.post(url, data)

    assert response.status_code == 403
    assert not Host.objects.filter(name="sneaked-in").exists()
    assert Host.objects.get(pk=host_b.pk).cluster_id == cluster_b.pk
