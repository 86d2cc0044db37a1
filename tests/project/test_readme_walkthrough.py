"""The README's API walkthrough, run as written: real curl and jq in bash against a live
server on the test database, with the demo seeded as `make run` seeds it (its administrator,
then the simulated hosts, then `seed_demo`) and a real task cluster running jobs and lease
events. It takes a VM from the demo pool, reserves capacity and launches a VM into it."""

from __future__ import annotations

import re
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from hosts import sync
from hosts.models import Cluster, Host, VirtualMachine, VmStatus
from leases.models import Lease
from pools.models import VmPool
from tests.conftest import wait_until
from tests.jobs.conftest import remove_domains

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
WRITTEN_URL = "CORRAL=http://127.0.0.1:8000\n"


def walkthrough() -> str:
    """The shell block between the README's walkthrough markers."""
    text = README.read_text()
    block = text.split("<!-- walkthrough:api -->", 1)[1].split("<!-- /walkthrough:api -->")[0]
    return block.split("```sh\n", 1)[1].rsplit("```", 1)[0]


@pytest.fixture
def demo(transactional_db, sim_daemons):
    """The demo as `make run` makes it: the administrator (its password), then the simulated
    hosts registered in cluster demo, then every app's demo seeder."""
    out = StringIO()
    call_command("demo_admin", stdout=out)
    password = re.search(r"password: (\S+)", out.getvalue()).group(1)
    cluster = Cluster.objects.create(name="demo")
    for daemon in sim_daemons:
        host = Host.objects.create(name=daemon.name, cluster=cluster, uri=daemon.uri)
        sync.sync_host(host.pk)
    seeded = StringIO()
    call_command("seed_demo", "--cluster", "demo", stdout=seeded)
    yield password, seeded.getvalue()
    remove_domains(sim_daemons, VirtualMachine.objects.values_list("uuid", flat=True))


def test_the_demo_has_a_reservable_host_beside_the_pools_hosts(demo):
    _, seeded = demo

    reservable = list(Host.objects.filter(cluster__name="demo", reservable=True))

    assert [host.name for host in reservable] == ["sim-3"]
    assert "Demo: host sim-3 is reservable (leases take capacity there)." in seeded
    call_command("seed_demo", "--cluster", "demo", stdout=StringIO())  # idempotent
    assert Host.objects.filter(reservable=True).count() == 1


def test_the_readme_api_walkthrough_takes_a_vm_reserves_capacity_and_launches_into_it(
    demo, live_server, task_cluster
):
    password, _ = demo
    workers = task_cluster(VMPOOL_MONITOR_INTERVAL="1")
    pool = VmPool.objects.get(name="demo-pool")
    wait_until(
        lambda: VmPool.objects.with_counts().get(pk=pool.pk).running_unassigned == 2,
        timeout=90,
        message=lambda: f"the demo pool never came up: {workers.log()[-3000:]}",
    )
    script = walkthrough()
    assert WRITTEN_URL in script
    script = script.replace(WRITTEN_URL, f"CORRAL={live_server.url}\n", 1)

    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env={"PATH": "/usr/bin:/bin", "ADMIN_PASSWORD": password, "HOME": "/tmp"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}\n{workers.log()[-3000:]}"
    taken = VirtualMachine.objects.get(pool=pool, owner__username="alice")
    assert f'"vm": "{taken.name}"' in ran.stdout and '"instant": true' in ran.stdout
    lease = Lease.objects.get(name="first-lease", owner__username="alice")
    assert lease.status == "ACTIVE"
    reserved = VirtualMachine.objects.select_related("host").get(name="reserved-1")
    assert reserved.reservation.lease == lease
    assert (reserved.status, reserved.host.name, reserved.host.reservable) == (
        VmStatus.UP,
        "sim-3",
        True,
    )
    assert '"state": "succeeded"' in ran.stdout
