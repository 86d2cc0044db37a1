"""The real ``openstack image ...`` CLI (python-openstackclient on openstacksdk) against a
running Corral: a qcow2 made with qemu-img goes up, shows, comes back byte for byte and goes.
Each command is a process of its own, so they are few and each checks several things."""

from __future__ import annotations

import hashlib
import subprocess

import pytest

from hosts.models import Image
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
