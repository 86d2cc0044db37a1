"""The real ``openstack`` CLI (python-openstackclient on openstacksdk, with blazarclient) against
a running Corral on simulated hosts, with a real task cluster running its jobs: an image goes
up, a key pair is made, a server is created and waited for, shown, stopped and started, its
console log and noVNC URL read, suspended and resumed, refused a lock, and deleted; an image
is made of a server (``server image create --wait``) and another server boots from it; a
lease reserves two instances and the CLI launches into it with the reservation's flavor and
server group, a third is refused (ERROR), and deleting the lease removes its servers. Each
command is a process of its own, so they are few and each checks several things."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from hosts.models import ConsoleLog, Host, Image, VirtualMachine
from leases.models import Lease
from tests.hosts.driver.guests import ssh_key
from tests.openstack.conftest import as_json, cli_time

pytestmark = pytest.mark.slow


@pytest.fixture
def server_env(shared_image_store):
    """The server, the task cluster and this process share one image store."""
    return shared_image_store


@pytest.fixture
def farm(sim_cluster, server_env, task_cluster, make_user, make_template, grant, lease_user):
    """alice (PowerUser of the simulated cluster, LeaseUser), the flavor m1.small there, two of
    the three simulated hosts reservable, and a task cluster running jobs and lease events."""
    alice = lease_user("alice")
    grant(alice, "PowerUser", sim_cluster)
    make_template("m1.small", cluster=sim_cluster, vcpus=1, memory_mb=128, disk_gb=1)
    Host.objects.filter(cluster=sim_cluster).exclude(name="sim-1").update(reservable=True)
    # A test-driver host has no screen to read: the tests write what the guest-info loop would
    # read from a real host, so the cluster's own loop (every 10 s) must not read over it.
    task_cluster(CORRAL_TICKER_RUN_SECONDS=1, CORRAL_GUEST_INFO_INTERVAL=3600, **server_env)
    return alice


def wait_for(predicate, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for_status(run, server: str, status: str) -> None:
    wait_for(
        lambda: as_json(run("server", "show", server, "-f", "json"))["status"] == status, status
    )


def test_the_openstack_cli_runs_a_server_through_its_life(farm, cloud, admin_user, tmp_path):
    as_admin, run = cloud(admin_user.username), cloud("alice")
    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    _, public = ssh_key(tmp_path, "laptop")
    (tmp_path / "laptop.pub").write_text(public + "\n")

    image = as_json(
        as_admin(
            "image", "create", "--disk-format", "qcow2", "--file", str(disk), "-f", "json", "deb"
        )
    )
    flavors = as_json(run("flavor", "list", "-f", "json"))
    key = as_json(
        run("keypair", "create", "--public-key", str(tmp_path / "laptop.pub"), "-f", "json", "k1")
    )
    created = as_json(
        run(
            "server", "create", "--flavor", "m1.small", "--image", "deb", "--key-name", "k1",
            "--nic", "auto", "--property", "role=web", "--wait", "-f", "json", "web one",
        )
    )  # fmt: skip

    assert image["status"] == "active"
    assert [flavor["Name"] for flavor in flavors] == ["m1.small"]
    assert key["name"] == "k1"
    assert created["status"] == "ACTIVE"
    vm = VirtualMachine.objects.get(uuid=created["id"])
    assert (vm.disk_image.uuid.hex, vm.owner.username) == (image["id"].replace("-", ""), "alice")

    listed = as_json(run("server", "list", "-f", "json"))
    shown = as_json(run("server", "show", "web one", "-f", "json"))
    assert [(server["Name"], server["Status"]) for server in listed] == [("web one", "ACTIVE")]
    assert (shown["key_name"], shown["flavor"].split(" ")[0]) == ("k1", "m1.small")
    assert shown["properties"] == {"role": "web"}

    # What the guest-info loop reads from a real host: its serial console and its screen.
    ConsoleLog.objects.create(vm=vm, text="corral-guest: booted\nlogin: ", size=27)
    VirtualMachine.objects.filter(pk=vm.pk).update(graphics_port=5901)
    log = run("console", "log", "show", "web one")
    url = as_json(run("console", "url", "show", "--novnc", "-f", "json", "web one"))["url"]
    page = requests.get(url, timeout=30)
    assert "corral-guest: booted" in log.stdout
    assert page.status_code == 200 and "corral/console.js" in page.text

    run("server", "stop", "web one")
    wait_for_status(run, "web one", "SHUTOFF")
    run("server", "start", "web one")
    wait_for_status(run, "web one", "ACTIVE")
    run("server", "suspend", "web one")
    wait_for_status(run, "web one", "PAUSED")
    run("server", "resume", "web one")
    wait_for_status(run, "web one", "ACTIVE")
    refused = run("server", "lock", "web one", ok=False)
    assert "Corral does not lock servers ('lock')" in refused.stderr

    run("server", "delete", "--wait", "web one")
    assert as_json(run("server", "list", "-f", "json")) == []
    assert not VirtualMachine.objects.filter(pk=vm.pk).exists()


def test_the_cli_launches_into_a_reservation_with_its_flavor_and_server_group(
    farm, cloud, admin_user, tmp_path
):
    as_admin, run = cloud(admin_user.username), cloud("alice")
    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    as_admin("image", "create", "--disk-format", "qcow2", "--file", str(disk), "deb")

    run(
        "reservation", "lease", "create", "--start-date", "now",
        "--end-date", cli_time(timezone.now() + timedelta(days=1)),
        "--reservation",
        "resource_type=virtual:instance,vcpus=1,memory_mb=128,disk_gb=1,amount=2,affinity=False",
        "lab",
    )  # fmt: skip
    lease = Lease.objects.get(name="lab")
    wait_for(lambda: Lease.objects.get(pk=lease.pk).status == "ACTIVE", "the lease to start")
    shown = as_json(run("reservation", "lease", "show", "lab", "-f", "json"))
    reservation = json.loads(shown["reservations"])  # the CLI prints it as a JSON text
    flavor, group = reservation["flavor_id"], reservation["server_group_id"]
    flavors = as_json(run("flavor", "list", "--all", "-f", "json"))
    assert [(f["ID"], f["Name"]) for f in flavors] == [
        ("m1.small", "m1.small"),
        (flavor, f"reservation:{flavor}"),
    ]

    def launch(name: str, ok: bool = True):
        return run(
            "server", "create", "--flavor", flavor, "--image", "deb", "--nic", "auto",
            "--hint", f"group={group}", "--wait", "-f", "json", name, ok=ok,
        )  # fmt: skip

    first, second = as_json(launch("node-1")), as_json(launch("node-2"))
    third = launch("node-3", ok=False)

    assert (first["status"], second["status"]) == ("ACTIVE", "ACTIVE")
    vms = VirtualMachine.objects.filter(reservation__lease=lease)
    assert vms.count() == 2
    assert {vm.host.reservable for vm in vms} == {True}
    errored = as_json(run("server", "show", "node-3", "-f", "json"))
    assert third.stderr == "Error creating server: node-3"  # --wait saw it go to ERROR
    assert errored["status"] == "ERROR"
    assert errored["fault"]["message"] == "The reservation's 2 instances are all launched."

    run("reservation", "lease", "delete", "lab")
    wait_for(lambda: not VirtualMachine.objects.filter(pk__in=[v.pk for v in vms]).exists(),
             "the lease's servers to go", timeout=90)  # fmt: skip
    names = [server["Name"] for server in as_json(run("server", "list", "-f", "json"))]
    assert names == ["node-3"]  # the refused one stays, in ERROR, until its owner deletes it


def test_the_cli_makes_an_image_of_a_server_and_boots_another_server_from_it(
    farm, cloud, admin_user, tmp_path
):
    as_admin, run = cloud(admin_user.username), cloud("alice")
    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    as_admin("image", "create", "--disk-format", "qcow2", "--file", str(disk), "deb")
    run(
        "server", "create", "--flavor", "m1.small", "--image", "deb", "--nic", "auto",
        "--wait", "web",
    )  # fmt: skip

    made = as_json(
        run(
            "server", "image", "create", "--name", "web snapshot", "--property", "purpose=demo",
            "--wait", "-f", "json", "web",
        )
    )  # fmt: skip

    assert (made["name"], made["status"], made["visibility"]) == (
        "web snapshot",
        "active",
        "private",
    )
    assert made["properties"]["purpose"] == "demo"
    assert made["properties"]["image_type"] == "snapshot"
    image = Image.objects.get(uuid=made["id"])
    assert (image.owner.username, image.status, image.format) == ("alice", "ready", "qcow2")
    booted = as_json(
        run(
            "server", "create", "--flavor", "m1.small", "--image", "web snapshot",
            "--nic", "auto", "--wait", "-f", "json", "web two",
        )
    )  # fmt: skip
    assert booted["status"] == "ACTIVE"
    assert VirtualMachine.objects.get(uuid=booted["id"]).disk_image_id == image.pk
