"""The real OpenStack clients against a running Corral: ``openstack reservation ...``
(python-openstackclient with python-blazarclient) and blazarclient's Python API, installed
from the package index into var/openstack-venv by ``make openstack-clients``.

The production web tier (gunicorn with uvicorn workers, as `make serve` runs it) serves the
test database; the CLI reads a clouds.yaml pointing at it, as a user's would. Each command is a
process of its own (the CLI's start-up is most of its time), so the commands are few and each
checks several things.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from hosts.models import Host
from leases.models import HostProperty, Lease
from tests.leases.fixtures import at, whole_hosts
from tests.openstack.conftest import SCRIPT, as_json, cli_time
from tests.openstack.fixtures import CLIENTS, PASSWORD

pytestmark = pytest.mark.slow


@pytest.fixture
def alice(lease_user):
    return lease_user("alice")


def test_the_openstack_cli_creates_lists_shows_changes_and_deletes_leases(
    cloud, alice, reservable_hosts
):
    reservable_hosts(2)
    run = cloud("alice")

    created = as_json(
        run(
            "reservation",
            "lease",
            "create",
            "cli-lease",
            "--start-date",
            cli_time(at(9)),
            "--end-date",
            cli_time(at(12)),
            "--reservation",
            "resource_type=virtual:instance,vcpus=1,memory_mb=1024,amount=2",
            "-f",
            "json",
        )
    )
    lease = Lease.objects.get(uuid=uuid.UUID(created["id"]))
    assert (lease.owner, lease.name, lease.end_date) == (alice, "cli-lease", at(12))
    (reservation,) = json.loads(f"[{created['reservations']}]")
    assert (reservation["amount"], reservation["affinity"]) == (2, None)

    listed = as_json(run("reservation", "lease", "list", "-f", "json"))
    assert [(item["id"], item["name"]) for item in listed] == [(created["id"], "cli-lease")]
    assert listed[0]["end_date"] == f"{at(12):%Y-%m-%dT%H:%M:%S.%f}"

    assert run("reservation", "lease", "set", "--prolong-for", "1h", "cli-lease").stdout == (
        "Updated lease: cli-lease\n"
    )
    lease.refresh_from_db()
    assert lease.end_date == at(13)

    run(
        "reservation",
        "lease",
        "set",
        "--end-date",
        cli_time(at(14)),
        "--defer-by",
        "30m",
        "--reservation",
        f"id={reservation['id']},amount=3",
        created["id"],
    )
    lease.refresh_from_db()
    assert (lease.start_date, lease.end_date) == (at(9.5), at(14))
    assert lease.reservations.get().amount == 3

    shown = as_json(run("reservation", "lease", "show", "cli-lease", "-f", "json"))
    assert shown["start_date"] == f"{at(9.5):%Y-%m-%dT%H:%M:%S.%f}"
    assert json.loads(f"[{shown['reservations']}]")[0]["amount"] == 3

    refused = run(
        "reservation",
        "lease",
        "set",
        "--reservation",
        f"id={reservation['id']},min=2",
        "cli-lease",
        ok=False,
    )
    assert refused.stderr == (
        f"ERROR: reservations: Reservation {reservation['id']} is virtual:instance; it has no min."
    )
    too_big = run(
        "reservation",
        "lease",
        "set",
        "--reservation",
        f"id={reservation['id']},amount=9",
        "cli-lease",
        ok=False,
    )
    assert too_big.stderr.startswith("ERROR: The change does not fit: only 6 of 9 instances")
    assert "(9 instances of 1024 MiB need 9216 MiB free; 6144 are free)" in too_big.stderr
    oversized = run(
        "reservation",
        "lease",
        "create",
        "oversized",
        "--start-date",
        cli_time(at(9)),
        "--end-date",
        cli_time(at(12)),
        "--reservation",
        "resource_type=virtual:instance,vcpus=128,memory_mb=1024,amount=1",
        ok=False,
    )
    assert oversized.stderr.startswith(
        f"ERROR: The lease does not fit: only 0 of 1 instance fit between {at(9):%Y-%m-%d %H:%M}"
        f" and {at(12):%Y-%m-%d %H:%M} (each instance asks 128 vCPUs; the largest reservable "
        "host has 64). "
    )
    assert run("reservation", "lease", "show", "nosuch", ok=False).stderr == (
        "Unable to find resource with name 'nosuch'"
    )
    missing = run("reservation", "lease", "show", str(uuid.uuid4()), ok=False)
    assert "not found" in missing.stderr

    assert run("reservation", "lease", "delete", "cli-lease").stdout == (
        "Deleted lease: cli-lease\n"
    )
    assert not Lease.objects.exists()


def test_the_openstack_cli_sets_min_and_max_of_a_host_reservation(cloud, alice, reservable_hosts):
    reservable_hosts(3)
    run = cloud("alice")

    created = as_json(
        run(
            "reservation",
            "lease",
            "create",
            "hosts-lease",
            "--start-date",
            cli_time(at(9)),
            "--end-date",
            cli_time(at(10)),
            "--reservation",
            "min=1,max=1,resource_type=physical:host",
            "-f",
            "json",
        )
    )
    (reservation,) = json.loads(f"[{created['reservations']}]")
    assert reservation["hypervisor_properties"] == reservation["resource_properties"] == ""

    run(
        "reservation",
        "lease",
        "set",
        "--reservation",
        f"id={reservation['id']},min=2,max=3",
        "hosts-lease",
    )

    stored = Lease.objects.get(name="hosts-lease").reservations.get()
    assert (stored.min, stored.max, stored.allocations.count()) == (2, 3, 3)


def test_a_wrong_password_is_refused_by_the_cli(cloud, make_user, tmp_path):
    make_user("mallory")
    run = cloud("mallory")
    clouds_yaml = tmp_path / "clouds.yaml"
    clouds_yaml.write_text(clouds_yaml.read_text().replace(PASSWORD, "wrong-password"))

    refused = run("reservation", "lease", "list", ok=False)

    assert "The request you have made requires authentication. (HTTP 401)" in refused.stderr


def test_the_openstack_cli_manages_reservable_hosts_and_their_properties(
    cloud, admin_user, alice, make_host, grant, make_lease, reservable_hosts
):
    (rented,) = reservable_hosts(1, capabilities={"rack": "r1"})
    node = make_host(cluster=rented.cluster, status="up", cpus=16, memory_mb=3072)
    grant(alice, "PolicyAdmin", rented.cluster)  # sees hosts, may not change them
    lease = make_lease(at(9), at(10), whole_hosts(1), owner=alice)
    run, run_alice = cloud(admin_user.username), cloud("alice")

    created = as_json(
        run("reservation", "host", "create", node.name, "--extra", "gpu=a100", "-f", "json")
    )
    assert (created["id"], created["gpu"]) == (str(node.pk), "a100")
    node.refresh_from_db()
    assert node.reservable

    listed = as_json(run("reservation", "host", "list", "-f", "json"))
    assert sorted(item["hypervisor_hostname"] for item in listed) == sorted(
        [rented.name, node.name]
    )
    run("reservation", "host", "set", node.name, "--extra", "gpu=h100")
    shown = as_json(run("reservation", "host", "show", str(node.pk), "-f", "json"))
    assert (shown["gpu"], shown["vcpus"]) == ("h100", 16)

    run("reservation", "host", "property", "set", "rack", "--private")
    assert HostProperty.objects.get(name="rack").private
    everything = as_json(
        run("reservation", "host", "property", "list", "--detail", "--all", "-f", "json")
    )
    assert [(p["property"], p["private"]) for p in everything] == [
        ("gpu", False),
        ("rack", True),
    ]
    public = as_json(run_alice("reservation", "host", "property", "list", "-f", "json"))
    assert public == [{"property": "gpu"}]
    gpu = as_json(run("reservation", "host", "property", "show", "gpu", "-f", "json"))
    assert (gpu["property"], gpu["property_values"]) == ("gpu", ["h100"])

    allocations = as_json(run("reservation", "allocation", "list", "host", "-f", "json"))
    held = {str(a["resource_id"]): a["reservations"] for a in allocations}
    assert [r["lease_id"] for r in held[str(rented.pk)]] == [str(lease.uuid)]
    assert held[str(node.pk)] == []
    one = as_json(run("reservation", "allocation", "show", "host", rented.name, "-f", "json"))
    assert str(lease.uuid) in one["reservations"]

    refused = run_alice("reservation", "host", "set", node.name, "--extra", "gpu=x", ok=False)
    assert refused.stderr == "ERROR: Policy doesn't allow blazar:oshosts:put to be performed"
    # A reserved host leaves the pool: its lease moves to the free one (the client takes the
    # 200 answer that says so as it takes Blazar's 204).
    assert run("reservation", "host", "delete", rented.name).stdout == (
        f"Deleted host: {rented.name}\n"
    )
    assert list(lease.reservations.get().allocations.values_list("host_id", flat=True)) == [node.pk]
    shown = as_json(run_alice("reservation", "lease", "show", str(lease.uuid), "-f", "json"))
    assert shown["degraded"] is False

    # The last one leaves too: the lease is degraded, and shows it.
    assert run("reservation", "host", "delete", node.name).stdout == (
        f"Deleted host: {node.name}\n"
    )
    node.refresh_from_db()
    assert not node.reservable
    assert Host.objects.filter(pk=node.pk).exists()
    shown = as_json(run_alice("reservation", "lease", "show", str(lease.uuid), "-f", "json"))
    assert shown["degraded"] is True


def test_the_blazarclient_python_api_works_through_a_keystoneauth_session(
    cloud, alice, reservable_hosts
):
    reservable_hosts(2)
    cloud("alice")
    url = cloud.url

    done = subprocess.run(
        [
            str(CLIENTS / "python"),
            str(SCRIPT),
            f"{url}/identity/v3",
            "alice",
            PASSWORD,
            cli_time(at(9)),
            cli_time(at(10)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"},
    )

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    lease_id = seen["created"]["id"]
    assert seen["prolonged"]["end_date"] == f"{at(12):%Y-%m-%dT%H:%M:%S.%f}"
    assert seen["deferred"]["start_date"] == f"{at(9.5):%Y-%m-%dT%H:%M:%S.%f}"
    assert seen["grown"]["reservations"][0]["amount"] == 2
    assert seen["grown"]["reservations"][0]["affinity"] is False
    assert seen["listed"] == [lease_id]
    assert seen["shown"]["id"] == lease_id
    assert seen["allocations"] == {  # an admin's call: alice is refused before any lookup
        "code": 403,
        "message": "ERROR: Policy doesn't allow blazar:oshosts:get_allocations to be performed",
    }
    assert seen["created"]["reservations"][0]["server_group_id"] is not None
    assert seen["missing"] == {
        "code": 404,
        "message": "ERROR: Lease 00000000-0000-0000-0000-000000000000 not found.",
    }
    assert seen["after_delete"] == []
    assert not Lease.objects.exists()


def test_an_application_credential_made_with_the_cli_runs_reservation_commands_until_deleted(
    cloud, alice, lease_user, make_lease, reservable_hosts, tmp_path
):
    reservable_hosts(2)
    bob = lease_user("bob")
    mine = make_lease(at(9), at(10), whole_hosts(1), owner=alice)
    make_lease(at(11), at(12), whole_hosts(1), owner=bob)
    run = cloud("alice")
    made = as_json(run("application", "credential", "create", "ci-farm", "-f", "json"))
    assert made["Name"] == "ci-farm" and made["Secret"]
    # The CI farm's clouds.yaml, as docs/blazar.md shows it: no username, no password.
    farm = tmp_path / "farm"
    farm.mkdir()
    (farm / "clouds.yaml").write_text(
        "clouds:\n"
        "  corral-ci:\n"
        "    auth_type: v3applicationcredential\n"
        "    auth:\n"
        f"      auth_url: {cloud.url}/identity/v3\n"
        f"      application_credential_id: {made['ID']}\n"
        f"      application_credential_secret: {made['Secret']}\n"
        "    region_name: RegionOne\n"
        "    interface: public\n"
        "    identity_api_version: 3\n"
    )

    def as_farm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(CLIENTS / "openstack"), "--os-cloud", "corral-ci", *args],
            env={
                "PATH": f"{CLIENTS}:/usr/bin:/bin",
                "HOME": str(farm),
                "OS_CLIENT_CONFIG_FILE": str(farm / "clouds.yaml"),
                "LC_ALL": "C.UTF-8",
            },
            capture_output=True,
            text=True,
            timeout=120,
        )

    listed = as_farm("reservation", "lease", "list", "-f", "json")
    assert listed.returncode == 0, listed.stderr
    assert [item["id"] for item in as_json(listed)] == [str(mine.uuid)]

    assert run("application", "credential", "delete", "ci-farm").returncode == 0
    refused = as_farm("reservation", "lease", "list")
    assert refused.returncode != 0
    assert "The request you have made requires authentication. (HTTP 401)" in refused.stderr


def test_the_pinned_clients_load_every_command_they_register(openstack_clients):
    """No "Could not load 'reservation_host_unset'" (blazarclient 4.6.0's broken entry point)
    or any other line on stderr: the CLI says only what the command answers."""
    done = subprocess.run(
        [str(openstack_clients / "openstack"), "reservation", "lease", "list", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"},
    )

    assert done.returncode == 0
    assert "reservation lease list" in done.stdout
    assert done.stderr == ""
