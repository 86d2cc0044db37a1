"""The real ``openstack`` CLI's first commands for users who are not admins: a PowerUser makes,
shows and deletes a server group and shows themself by name; a pool's user lists the zone
their servers run in; an admin shows anyone (the web tier and the CLI as in
test_real_clients.py)."""

from __future__ import annotations

import pytest

from scheduling.models import AffinityGroup
from tests.openstack.conftest import as_json

pytestmark = pytest.mark.slow


def test_a_power_user_makes_shows_and_deletes_a_server_group_and_shows_themself(
    cloud, make_user, make_cluster, grant
):
    alice = make_user("alice")
    make_user("bob")
    cluster = make_cluster("zone-a")
    grant(alice, "PowerUser", cluster)
    run = cloud("alice")

    made = as_json(
        run("server", "group", "create", "--policy", "anti-affinity", "web", "-f", "json")
    )
    shown = as_json(run("server", "group", "show", "web", "-f", "json"))
    run("server", "group", "delete", "web")
    me = as_json(run("user", "show", "alice", "-f", "json"))
    other = run("user", "show", "bob", ok=False)

    assert (made["name"], made["policies"]) == ("web", ["anti-affinity"])
    assert shown["id"] == made["id"]
    assert not AffinityGroup.objects.exists()
    assert (me["id"], me["name"], me["domain_id"]) == (str(alice.pk), "alice", "default")
    assert "No User found for bob" in other.stderr


def test_a_pool_user_lists_their_zone_and_an_admin_shows_any_user(
    cloud, admin_user, make_user, make_cluster, make_host, make_pool, grant
):
    carol = make_user("carol")
    pooled = make_cluster("zone-b")
    make_cluster("zone-c")
    make_host(cluster=pooled, name="node1", status="up")
    grant(carol, "UserRole", make_pool(cluster=pooled))  # no grant on the cluster
    run, run_admin = cloud("carol"), cloud(admin_user.username)

    zones = as_json(run("availability", "zone", "list", "-f", "json"))
    shown = as_json(run_admin("user", "show", "carol", "-f", "json"))

    assert [(z["Zone Name"], z["Zone Status"]) for z in zones] == [("zone-b", "available")]
    assert (shown["id"], shown["enabled"]) == (str(carol.pk), True)
