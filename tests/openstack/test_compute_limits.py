"""Nova's limits and availability zones: what Corral limits a user to (-1 where it sets no
limit), what the user's VMs hold, and one zone per cluster the user may use."""

from __future__ import annotations

import pytest
import time_machine

from hosts.models import HostStatus, VmStatus
from leases import lifecycle
from project.sshkeys import MAX_KEYS_PER_USER
from tests.leases.fixtures import at, instances
from tests.openstack.conftest import nova_get
from tests.pools.fixtures import add_pool_vms

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"


def test_used_figures_count_the_callers_vms(nova_for, make_user, make_vm, make_cluster, grant):
    user, other = make_user(), make_user()
    cluster = make_cluster()
    grant(user, "PowerUser", cluster)
    make_vm(cluster=cluster, owner=user, vcpus=2, memory_mb=2048)
    make_vm(cluster=cluster, owner=user, vcpus=1, memory_mb=512)
    make_vm(cluster=cluster, owner=other, vcpus=8, memory_mb=8192)

    absolute = nova_get(nova_for(user), f"{V}/limits")["limits"]["absolute"]

    assert (
        absolute["totalInstancesUsed"],
        absolute["totalCoresUsed"],
        absolute["totalRAMUsed"],
    ) == (2, 3, 2560)
    assert absolute["maxTotalKeypairs"] == MAX_KEYS_PER_USER
    assert absolute["maxServerGroups"] == -1


def test_the_totals_are_the_callers_quota_and_unlimited_is_minus_one(
    nova_for, make_user, make_cluster, grant, settings
):
    settings.CORRAL_QUOTA_VMS = 4
    settings.CORRAL_QUOTA_MEMORY_MB = None
    user, root = make_user(), make_user(superuser=True)
    grant(user, "PowerUser", make_cluster())

    absolute = nova_get(nova_for(user), f"{V}/limits")["limits"]["absolute"]
    unlimited = nova_get(nova_for(root), f"{V}/limits")["limits"]["absolute"]

    assert (absolute["maxTotalInstances"], absolute["maxTotalRAMSize"]) == (4, -1)
    assert absolute["maxTotalCores"] == settings.CORRAL_QUOTA_VCPUS
    assert (unlimited["maxTotalInstances"], unlimited["maxTotalCores"]) == (-1, -1)


def test_network_limits_leave_at_2_36_and_rate_limits_are_none(nova_for, make_user):
    nova = nova_for(make_user())

    old = nova_get(nova, f"{V}/limits")["limits"]
    new = nova.get(f"{V}/limits", HTTP_OPENSTACK_API_VERSION="compute 2.36").json()["limits"]

    assert old["rate"] == []
    assert old["absolute"]["maxSecurityGroups"] == -1
    assert "maxSecurityGroups" not in new["absolute"]
    assert "maxTotalFloatingIps" not in new["absolute"]


def test_server_groups_used_are_those_the_caller_made(nova_for, make_user, make_cluster, grant):
    user = make_user()
    grant(user, "ClusterAdmin", make_cluster())
    nova = nova_for(user)
    nova.post(
        f"{V}/os-server-groups",
        {"server_group": {"name": "g", "policies": ["affinity"]}},
        format="json",
    )

    absolute = nova_get(nova, f"{V}/limits")["limits"]["absolute"]

    assert absolute["totalServerGroupsUsed"] == 1


def test_each_cluster_the_user_may_see_is_a_zone_available_while_a_host_is_up(
    nova_for, make_user, make_cluster, make_host, grant
):
    user = make_user()
    running, idle, hidden = make_cluster("running"), make_cluster("idle"), make_cluster("hidden")
    make_host(cluster=running, status=HostStatus.UP)
    make_host(cluster=idle, status=HostStatus.MAINTENANCE)
    make_host(cluster=hidden, status=HostStatus.UP)
    grant(user, "PowerUser", running)
    grant(user, "PowerUser", idle)

    zones = nova_get(nova_for(user), f"{V}/os-availability-zone")["availabilityZoneInfo"]

    assert zones == [
        {"zoneName": "idle", "zoneState": {"available": False}, "hosts": None},
        {"zoneName": "running", "zoneState": {"available": True}, "hosts": None},
    ]


def test_a_pool_user_and_a_lease_owner_have_the_zones_their_servers_run_in(
    nova_for,
    make_user,
    make_cluster,
    make_host,
    make_pool,
    grant,
    make_lease,
    lease_user,
    reservable_hosts,
    django_assert_max_num_queries,
):
    pooled, leased, other = make_cluster("pooled"), make_cluster("leased"), make_cluster("other")
    make_host(cluster=pooled, status=HostStatus.UP)
    make_host(cluster=other, status=HostStatus.UP)
    reservable_hosts(1, cluster=leased)
    pool_user, owner, stranger = make_user(), lease_user(), lease_user()
    grant(pool_user, "UserRole", make_pool(cluster=pooled))  # no grant on the cluster
    lease = make_lease(at(10), at(12), instances(1), owner=owner)
    with time_machine.travel(at(10), tick=False):
        lifecycle.start_lease(lease)

    with django_assert_max_num_queries(6):
        pool_zones = nova_get(nova_for(pool_user), f"{V}/os-availability-zone")
    lease_zones = nova_get(nova_for(owner), f"{V}/os-availability-zone")
    strangers = nova_get(nova_for(stranger), f"{V}/os-availability-zone")

    assert pool_zones["availabilityZoneInfo"] == [
        {"zoneName": "pooled", "zoneState": {"available": True}, "hosts": None}
    ]
    assert lease_zones["availabilityZoneInfo"] == [
        {"zoneName": "leased", "zoneState": {"available": True}, "hosts": None}
    ]
    assert strangers["availabilityZoneInfo"] == []


def test_a_pool_user_may_name_their_zone_when_creating_a_server(
    sim_cluster, nova_for, make_user, make_template, make_pool, grant
):
    template = make_template("ci.node", cluster=sim_cluster, memory_mb=128, disk_gb=1)
    pool = make_pool(cluster=sim_cluster, template=template, size=1, prestarted_vms=1)
    [running] = add_pool_vms(pool, [VmStatus.UP])
    user = make_user()
    grant(user, "UserRole", pool)
    body = {
        "name": "job-1",
        "flavorRef": "ci.node",
        "networks": "auto",
        "availability_zone": sim_cluster.name,
    }

    created = nova_for(user).post(f"{V}/servers", {"server": body}, format="json")

    assert created.status_code == 202, created.content
    assert created.json()["server"]["id"] == str(running.uuid)


def test_the_zone_detail_names_the_hosts_for_admins_only(
    nova_for, make_user, admin_user, make_cluster, make_host
):
    cluster = make_cluster("zone-a")
    make_host(cluster=cluster, name="node1", status=HostStatus.UP)

    detail = nova_get(nova_for(admin_user), f"{V}/os-availability-zone/detail")
    refused = nova_for(make_user()).get(f"{V}/os-availability-zone/detail")

    (zone,) = detail["availabilityZoneInfo"]
    assert zone["zoneName"] == "zone-a"
    assert zone["hosts"]["node1"]["nova-compute"]["available"] is True
    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-availability-zone:detail to be performed."
    )
