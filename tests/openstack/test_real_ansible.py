"""Ansible's ``openstack.cloud`` collection (the ``ansible`` package of var/ansible-venv) against
a running Corral on simulated hosts with a task cluster, run by an ordinary user through the
playbooks of tests/openstack/playbooks/: the admin sets their cores with the ``quota`` module,
then they upload a private image, boot a server from it, stop it and read it back (``image``,
``server``, ``server_action``, ``server_info``); the server's task run again changes nothing;
a second server past their quota is refused in
Nova's words, and they delete the server and the image. ``openstack quota show --usage``
follows their use up and down; a second user never sees the image."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hosts.models import Image, Quota, VirtualMachine, VmStatus
from openstack.models import Server
from tests.openstack.conftest import as_json

pytestmark = pytest.mark.slow

PLAYBOOKS = Path(__file__).with_name("playbooks")


@pytest.fixture
def server_env(shared_image_store):
    """The server, the task cluster and this process share one image store."""
    return shared_image_store


@pytest.fixture
def playbook(cloud, ansible_clients, tmp_path):
    """playbook(name, **extra_vars) -> (exit status, each task's result on localhost by the
    task's name): ``ansible-playbook`` of tests/openstack/playbooks/ as a user runs it, its
    modules on this machine with the clouds of ``cloud``'s clouds.yaml (call ``cloud`` for
    each user first), its report read from Ansible's JSON callback."""
    env = {
        "PATH": f"{ansible_clients}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LC_ALL": "C.UTF-8",
        "OS_CLIENT_CONFIG_FILE": str(cloud.clouds_yaml),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_PYTHON_INTERPRETER": str(ansible_clients / "python"),
        "ANSIBLE_NOCOWS": "1",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_HOME": str(tmp_path / "ansible"),
        "ANSIBLE_DISPLAY_TRACEBACK": "error",
    }

    def run(name: str, **extra_vars) -> tuple[int, dict[str, dict]]:
        done = subprocess.run(
            [
                str(ansible_clients / "ansible-playbook"),
                "--extra-vars",
                json.dumps(extra_vars),
                str(PLAYBOOKS / name),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.stdout.startswith("{"), done.stdout + done.stderr
        report = json.loads(done.stdout)
        tasks = {
            task["task"]["name"]: task["hosts"]["localhost"]
            for play in report["plays"]
            for task in play["tasks"]
        }
        return done.returncode, tasks

    return run


def failures(tasks: dict[str, dict]) -> dict[str, str]:
    """What Ansible said of each task that failed, with the module's traceback."""
    return {
        name: (result.get("msg"), result.get("exception"))
        for name, result in tasks.items()
        if result.get("failed")
    }


def usage_of(rows: list[dict]) -> dict:
    return {row["Resource"]: (row["Limit"], row["In Use"]) for row in rows}


def test_an_ordinary_user_runs_a_server_of_their_own_image_with_ansible(
    sim_cluster, task_cluster, server_env, cloud, playbook, admin_user, make_user, make_template,
    grant, tmp_path,
):  # fmt: skip
    Quota.objects.create(vcpus=1)  # everyone's default: no server of two cores
    alice, bob = make_user("alice"), make_user("bob")
    grant(alice, "PowerUser", sim_cluster)
    grant(bob, "PowerUser", sim_cluster)
    make_template(
        "m1.duo", cluster=sim_cluster, vcpus=2, memory_mb=128, disk_gb=1, networks=["default"]
    )
    task_cluster(CORRAL_TICKER_RUN_SECONDS=1, **server_env)
    run, as_bob = cloud("alice"), cloud("bob")
    cloud(admin_user.username)
    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    clouds = {"admin_cloud": admin_user.username, "user_cloud": "alice"}

    status, tasks = playbook("self_service.yml", disk=str(disk), **clouds)

    assert status == 0, failures(tasks)
    assert tasks["Set the user's cores"]["quotas"]["compute"]["cores"] == 2
    assert Quota.objects.get(user=alice).vcpus == 2
    image = tasks["Upload a private image"]["image"]
    assert (image["visibility"], image["status"], image["owner"]) == (
        "private",
        "active",
        str(alice.pk),
    )
    assert (image["size"], image["virtual_size"]) == (disk.stat().st_size, 16 << 20)
    stored = Image.objects.get(uuid=image["id"])
    assert (stored.owner, stored.visibility) == (alice, "private")
    booted = tasks["Boot a server from it"]["server"]
    assert (booted["status"], list(booted["addresses"])) == ("ACTIVE", ["default"])
    vm = VirtualMachine.objects.get(uuid=booted["id"])
    assert (vm.owner, vm.disk_image, vm.template.name) == (alice, stored, "m1.duo")
    assert tasks["Stop it"]["changed"] is True
    (shown,) = tasks["Read it back"]["servers"]
    assert (shown["id"], shown["status"], shown["image"]["id"]) == (
        booted["id"],
        "SHUTOFF",
        image["id"],
    )
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.DOWN

    hidden = as_bob("image", "show", image["id"], ok=False)
    assert f"No Image found for {image['id']}" in hidden.stderr
    assert image["id"] not in as_bob("image", "list", "-f", "value", "-c", "ID").stdout
    up = usage_of(as_json(run("quota", "show", "--usage", "-f", "json")))
    assert (up["cores"], up["instances"][1], up["ram"][1]) == ((2, 2), 1, 128)

    status, tasks = playbook("over_limit.yml", **clouds)

    assert status == 2  # a task failed
    for task in (
        "Boot the first server again",
        "Boot the first server again, no public address asked",
    ):
        again = tasks[task]
        assert (again.get("failed"), again["server"]["id"], again["server"]["status"]) == (
            None,
            booted["id"],
            "SHUTOFF",
        ), failures(tasks)
    assert tasks["Boot the first server again, no public address asked"]["changed"] is False
    refused = tasks["Boot a second server"]
    assert refused["failed"] is True and refused["msg"].startswith("ForbiddenException: 403: ")
    assert refused["msg"].endswith(
        "Quota exceeded for cores: Requested 2, but already used 2 of 2 cores"
    )
    assert list(VirtualMachine.objects.filter(owner=alice)) == [vm]
    assert not Server.objects.filter(name="web-2").exists()

    status, tasks = playbook("clean_up.yml", **clouds)

    assert status == 0, failures(tasks)
    assert tasks["Delete the server"]["changed"] and tasks["Delete the image"]["changed"]
    down = usage_of(as_json(run("quota", "show", "--usage", "-f", "json")))
    assert (down["cores"], down["instances"][1], down["ram"][1]) == ((2, 0), 0, 0)
    assert not VirtualMachine.objects.filter(owner=alice).exists()
    assert not Image.objects.filter(uuid=image["id"]).exists()
