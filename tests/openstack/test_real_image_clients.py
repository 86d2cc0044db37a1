"""The real ``openstack image ...`` CLI (python-openstackclient on openstacksdk) against a
running Corral: a qcow2 made with qemu-img goes up, shows, comes back byte for byte and goes;
users who are not admins share one with another, who accepts it and boots from it. Each
command is a process of its own, so they are few and each checks several things."""

from __future__ import annotations

import hashlib
import subprocess

import pytest

from hosts.models import Image, ImageMember, VirtualMachine
from tests.openstack.conftest import as_json

pytestmark = pytest.mark.slow


@pytest.fixture
def server_env(shared_image_store):
    """The server and this process share one image store."""
    return shared_image_store


@pytest.fixture
def disk(tmp_path):
    path = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "16M"], check=True)
    return path


def test_the_openstack_cli_uploads_lists_shows_saves_and_deletes_an_image(
    cloud, make_user, grant, disk, tmp_path
):
    alice = make_user("alice")
    grant(alice, "ClusterAdmin")
    run = cloud("alice")
    data = disk.read_bytes()

    created = as_json(
        run(
            "image",
            "create",
            "--disk-format",
            "qcow2",
            "--file",
            str(disk),
            "cli disk",
            "-f",
            "json",
        )
    )
    assert (created["name"], created["status"], created["size"]) == (
        "cli disk",
        "active",
        len(data),
    )
    assert created["checksum"] == hashlib.md5(data).hexdigest()
    # The CLI shows Glance's secure hash among the properties, by its own name.
    assert created["properties"]["os_hash_value"] == hashlib.sha512(data).hexdigest()
    image = Image.objects.get(uuid=created["id"])
    assert (image.format, image.virtual_size_bytes, image.uploaded_by) == ("qcow2", 16 << 20, alice)

    listed = as_json(run("image", "list", "-f", "json"))
    assert listed == [{"ID": created["id"], "Name": "cli disk", "Status": "active"}]
    shown = as_json(run("image", "show", "cli disk", "-f", "json"))
    assert (shown["id"], shown["disk_format"], shown["virtual_size"]) == (
        created["id"],
        "qcow2",
        16 << 20,
    )

    run("image", "set", "--property", "os_distro=debian", "--name", "cli-disk", "cli disk")
    changed = as_json(run("image", "show", "cli-disk", "-f", "json"))
    assert changed["properties"]["os_distro"] == "debian"

    saved = tmp_path / "saved.qcow2"
    run("image", "save", "--file", str(saved), "cli-disk")
    assert saved.read_bytes() == data

    mismatch = run(
        "image", "create", "--disk-format", "raw", "--file", str(disk), "said-raw", ok=False
    )
    assert "disk_format: The file is qcow2, not raw." in mismatch.stderr

    run("image", "delete", "cli-disk")
    assert as_json(run("image", "list", "-f", "json")) == []
    assert not Image.objects.exists()


def test_users_share_an_image_with_another_project_who_accepts_it_and_boots_from_it(
    cloud, make_user, grant, sim_cluster, make_template, task_cluster, server_env, disk
):
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    for user in (alice, bob, carol):
        grant(user, "PowerUser", sim_cluster)
    make_template("m1.small", cluster=sim_cluster, vcpus=1, memory_mb=128, disk_gb=1)
    task_cluster(CORRAL_TICKER_RUN_SECONDS=1, CORRAL_GUEST_INFO_INTERVAL=3600, **server_env)
    as_alice, as_bob, as_carol = cloud("alice"), cloud("bob"), cloud("carol")
    image_id = as_json(
        as_alice("image", "create", "--disk-format", "qcow2", "--file", str(disk), "-f", "json",
                 "golden")
    )["id"]  # fmt: skip

    as_alice("image", "set", "--shared", "golden")
    # Keystone will not show alice bob's project: the CLI takes the id as she gave it.
    offered = as_json(as_alice("image", "add", "project", "golden", str(bob.pk), "-f", "json"))
    as_bob("image", "set", "--accept", image_id)
    listed = as_json(as_bob("image", "list", "-f", "json"))
    server = as_json(
        as_bob("server", "create", "--flavor", "m1.small", "--image", image_id, "--nic", "auto",
               "--wait", "-f", "json", "from-golden")
    )  # fmt: skip
    members = as_json(as_alice("image", "member", "list", "golden", "-f", "json"))
    hidden = as_carol("image", "show", image_id, ok=False)

    assert (offered["member_id"], offered["status"]) == (str(bob.pk), "pending")
    assert [(row["ID"], row["Name"]) for row in listed] == [(image_id, "golden")]
    assert server["status"] == "ACTIVE"
    vm = VirtualMachine.objects.get(uuid=server["id"])
    assert (str(vm.disk_image.uuid), vm.owner) == (image_id, bob)
    assert [(row["Member ID"], row["Status"]) for row in members] == [(str(bob.pk), "accepted")]
    assert ImageMember.objects.get().user == bob
    assert hidden.stderr == f"No Image found for {image_id}"
