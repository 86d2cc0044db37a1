"""Nova's hypervisors are Corral's hosts, for admins only (the policy is checked before any
lookup); limits and availability zones are what Corral limits and where it places."""

from __future__ import annotations

import pytest

from hosts.models import HostStatus
from tests.openstack.conftest import nova_get

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"
HYPERVISORS = f"{V}/os-hypervisors"
GIB = 1024**3


@pytest.fixture
def busy_host(make_host, make_vm, make_cluster):
    cluster = make_cluster("zone-a")
    host = make_host(
        cluster=cluster,
        name="node1",
        uri="qemu+ssh://root@10.0.0.7/system",
        status=HostStatus.UP,
        cpus=8,
        memory_mb=16384,
        storage_capacity_bytes=100 * GIB,
        storage_free_bytes=60 * GIB,
    )
    make_vm(cluster=cluster, host=host, status="up", vcpus=2, memory_mb=2048)
    make_vm(cluster=cluster, host=host, status="down", vcpus=4, memory_mb=4096)
    return host


def test_an_admin_sees_hosts_as_hypervisors_with_what_their_vms_are_given(
    nova_for, admin_user, busy_host
):
    nova = nova_for(admin_user)

    listed = nova_get(nova, HYPERVISORS)["hypervisors"]
    detailed = nova_get(nova, f"{HYPERVISORS}/detail")["hypervisors"]
    shown = nova_get(nova, f"{HYPERVISORS}/{busy_host.pk}")["hypervisor"]

    assert listed == [
        {"id": busy_host.pk, "hypervisor_hostname": "node1", "state": "up", "status": "enabled"}
    ]
    assert detailed == [shown]
    assert {
        key: shown[key]
        for key in (
            "hypervisor_type",
            "host_ip",
            "vcpus",
            "vcpus_used",
            "memory_mb",
            "memory_mb_used",
            "free_ram_mb",
            "local_gb",
            "local_gb_used",
            "free_disk_gb",
            "running_vms",
            "service",
            "cpu_info",
        )
    } == {
        "hypervisor_type": "QEMU",
        "host_ip": "10.0.0.7",
        "vcpus": 8,
        "vcpus_used": 2,
        "memory_mb": 16384,
        "memory_mb_used": 2048,
        "free_ram_mb": 14336,
        "local_gb": 100,
        "local_gb_used": 40,
        "free_disk_gb": 60,
        "running_vms": 1,
        "service": {"host": "node1", "id": busy_host.pk, "disabled_reason": None},
        "cpu_info": "{}",
    }


def test_cpu_info_is_an_object_from_2_28(nova_for, admin_user, busy_host):
    shown = nova_for(admin_user).get(
        f"{HYPERVISORS}/{busy_host.pk}", HTTP_OPENSTACK_API_VERSION="compute 2.28"
    )

    assert shown.json()["hypervisor"]["cpu_info"] == {}


def test_a_host_in_maintenance_is_a_disabled_hypervisor_and_a_lost_one_is_down(
    nova_for, admin_user, make_host
):
    resting = make_host(name="resting", status=HostStatus.MAINTENANCE, status_detail="disk swap")
    lost = make_host(name="lost", status=HostStatus.NON_RESPONSIVE)

    listed = nova_get(nova_for(admin_user), f"{HYPERVISORS}/detail")["hypervisors"]

    by_name = {h["hypervisor_hostname"]: h for h in listed}
    assert (by_name["resting"]["state"], by_name["resting"]["status"]) == ("up", "disabled")
    assert by_name["resting"]["service"]["disabled_reason"] == "disk swap"
    assert (by_name["lost"]["state"], by_name["lost"]["status"]) == ("down", "enabled")
    assert {resting.pk, lost.pk} == {h["id"] for h in listed}


def test_hypervisors_are_found_by_a_part_of_their_name(nova_for, admin_user, make_host):
    make_host(name="rack1-node1")
    make_host(name="rack1-node2")
    make_host(name="rack2-node1")
    nova = nova_for(admin_user)

    searched = nova_get(nova, f"{HYPERVISORS}/RACK1/search")["hypervisors"]
    queried = nova_get(nova, f"{HYPERVISORS}/detail?hypervisor_hostname_pattern=node1")
    none = nova.get(f"{HYPERVISORS}/rack9/search")

    assert [h["hypervisor_hostname"] for h in searched] == ["rack1-node1", "rack1-node2"]
    assert [h["hypervisor_hostname"] for h in queried["hypervisors"]] == [
        "rack1-node1",
        "rack2-node1",
    ]
    assert none.status_code == 404
    assert none.json()["itemNotFound"]["message"] == (
        "No hypervisor matching 'rack9' could be found."
    )


def test_servers_of_matching_hypervisors_are_listed_by_name_and_uuid(
    nova_for, admin_user, busy_host
):
    hypervisors = nova_get(nova_for(admin_user), f"{HYPERVISORS}/node/servers")["hypervisors"]

    assert sorted(s["uuid"] for s in hypervisors[0]["servers"]) == sorted(
        str(vm.uuid) for vm in busy_host.vms.all()
    )


def test_statistics_sum_every_hypervisor(nova_for, admin_user, busy_host, make_host):
    make_host(cpus=4, memory_mb=1024, status=HostStatus.UP)

    stats = nova_get(nova_for(admin_user), f"{HYPERVISORS}/statistics")["hypervisor_statistics"]

    assert (stats["count"], stats["vcpus"], stats["memory_mb"], stats["running_vms"]) == (
        2,
        12,
        17408,
        1,
    )


def test_an_unknown_hypervisor_is_novas_404_and_uptime_is_not_implemented(
    nova_for, admin_user, busy_host
):
    nova = nova_for(admin_user)

    unknown = nova.get(f"{HYPERVISORS}/999999")
    named = nova.get(f"{HYPERVISORS}/node1")
    uptime = nova.get(f"{HYPERVISORS}/{busy_host.pk}/uptime")

    assert unknown.status_code == named.status_code == 404
    assert unknown.json()["itemNotFound"]["message"] == (
        "Hypervisor with ID '999999' could not be found."
    )
    assert uptime.status_code == 501


@pytest.mark.parametrize(
    "path, policy",
    [
        ("", "list"),
        ("/detail", "list-detail"),
        ("/999999", "show"),
        ("/999999/uptime", "uptime"),
        ("/statistics", "statistics"),
        ("/nosuch/search", "search"),
    ],
)
def test_a_user_is_refused_by_policy_before_any_lookup(
    nova_for, make_user, make_cluster, grant, path, policy
):
    user = make_user()
    grant(user, "ClusterAdmin", make_cluster())  # an admin of one cluster only

    refused = nova_for(user).get(f"{HYPERVISORS}{path}")

    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == (
        f"Policy doesn't allow os_compute_api:os-hypervisors:{policy} to be performed."
    )
