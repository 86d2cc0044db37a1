"""The real OpenStack CLI against a running Corral for key pairs, server groups, hypervisors,
availability zones and limits (the web tier and the CLI as in test_real_clients.py)."""

from __future__ import annotations

import json

import pytest

from project.models import SshKey
from scheduling.models import AffinityGroup
from tests.openstack.conftest import as_json

pytestmark = pytest.mark.slow

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnK0cqtxY3MNqxG3BRdrnpGnM5FbZ9FqMY3pJ6wKXmO ann@laptop"
MD5 = "46:67:88:f8:4b:13:bc:d3:34:b5:0f:73:d6:19:ba:2e"  # ssh-keygen -l -E md5


def test_the_openstack_cli_manages_keypairs_and_server_groups_and_reads_hosts_and_limits(
    cloud,
    admin_user,
    make_user,
    make_cluster,
    make_host,
    grant,
    tmp_path,
):
    ann = make_user("ann")
    cluster = make_cluster("zone-a")
    grant(ann, "ClusterAdmin", cluster)
    make_host(cluster=cluster, name="node1", status="up", cpus=8, memory_mb=4096)
    public = tmp_path / "id_ed25519.pub"
    public.write_text(KEY + "\n")
    run, run_admin = cloud("ann"), cloud(admin_user.username)

    made = as_json(run("keypair", "create", "--public-key", str(public), "k1", "-f", "json"))
    assert (made["name"], made["fingerprint"]) == ("k1", MD5)
    assert SshKey.objects.get(owner=ann).public_key == KEY
    listed = as_json(run("keypair", "list", "-f", "json"))
    assert [(k["Name"], k["Fingerprint"]) for k in listed] == [("k1", MD5)]
    shown = as_json(run("keypair", "show", "k1", "-f", "json"))
    assert (shown["name"], shown["user_id"]) == ("k1", str(ann.pk))

    group = as_json(
        run("server", "group", "create", "--policy", "anti-affinity", "g1", "-f", "json")
    )
    assert (group["name"], group["policies"]) == ("g1", ["anti-affinity"])
    stored = AffinityGroup.objects.get()
    assert (stored.cluster, stored.vm_rule, stored.vm_enforcing) == (cluster, "negative", True)
    groups = as_json(run("server", "group", "list", "-f", "json"))
    assert [(g["ID"], g["Name"]) for g in groups] == [(group["id"], "g1")]

    hypervisors = as_json(run_admin("hypervisor", "list", "-f", "json"))
    assert [(h["Hypervisor Hostname"], h["State"]) for h in hypervisors] == [("node1", "up")]
    refused = run("hypervisor", "list", ok=False)
    assert "Policy doesn't allow os_compute_api:os-hypervisors:list-detail" in refused.stderr

    zones = as_json(run("availability", "zone", "list", "--compute", "-f", "json"))
    assert [(z["Zone Name"], z["Zone Status"]) for z in zones] == [("zone-a", "available")]

    limits = as_json(run("limits", "show", "--absolute", "-f", "json"))
    by_name = {item["Name"]: item["Value"] for item in limits}
    assert (by_name["max_total_keypairs"], by_name["total_server_groups_used"]) == (50, 1)

    run("keypair", "delete", "k1")
    assert not SshKey.objects.filter(owner=ann).exists()
    assert json.loads(run("keypair", "list", "-f", "json").stdout) == []
