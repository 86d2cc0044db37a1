"""The README's walkthrough on the demo as `make run` seeds it (its administrator, then the
simulated hosts, then `seed_demo`), with a real task cluster running jobs and lease events:
take a VM from the demo pool, reserve capacity, launch a VM into the reservation. The API
part runs as written, real curl and jq in bash against a live server on the test database;
the portal part posts the pages' forms with the values the README gives."""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from hosts import sync
from hosts.models import Cluster, Host, Template, VirtualMachine, VmStatus
from leases.models import Lease
from pools.models import VmPool
from tests.conftest import wait_until
from tests.hosts.fixtures import remove_domains

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
    assert '"host_name": "sim-3"' in ran.stdout


def test_the_readme_portal_walkthrough_takes_a_vm_reserves_capacity_and_launches_into_it(
    demo, task_cluster, make_user, grant
):
    workers = task_cluster(VMPOOL_MONITOR_INTERVAL="1")
    pool = VmPool.objects.get(name="demo-pool")
    alice = make_user("alice")
    grant(alice, "UserRole", pool)
    grant(alice, "LeaseUser")
    portal = Client()
    portal.force_login(alice)
    wait_until(
        lambda: VmPool.objects.with_counts().get(pk=pool.pk).running_unassigned == 2,
        timeout=90,
        message=lambda: f"the demo pool never came up: {workers.log()[-3000:]}",
    )

    # 1. Take a VM.
    card = portal.get("/").content.decode()
    taken = portal.post(f"/pools/{pool.pk}/take/", follow=True)
    # 2. Reserve capacity: start now, end two hours away, one instance of 1 vCPU, 1024 MiB.
    end = timezone.localtime(timezone.now() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    reserved = portal.post(
        "/leases/new/",
        {
            "name": "first-lease",
            "start_now": "on",
            "end": end,
            "vcpus": "1",
            "memory_mb": "1024",
            "disk_gb": "10",
            "amount": "1",
            "affinity": "any",
        },
    )
    lease = Lease.objects.get(name="first-lease")
    wait_until(lambda: Lease.objects.get(pk=lease.pk).status == "ACTIVE", timeout=30)
    # 3. Launch a VM of the template tiny into the reservation.
    launched = portal.post(
        f"/leases/{lease.pk}/launch/",
        {
            "name": "reserved-1",
            "template": Template.objects.get(name="tiny").pk,
            "reservation": lease.reservations.get().pk,
        },
    )
    reserved_vm = VirtualMachine.objects.get(name="reserved-1")
    wait_until(
        lambda: VirtualMachine.objects.get(pk=reserved_vm.pk).status == VmStatus.UP,
        timeout=60,
        message=lambda: workers.log()[-3000:],
    )

    assert 'data-pool="demo-pool"' in card
    mine = VirtualMachine.objects.get(pool=pool, owner=alice)
    assert f"VM {mine.name} is yours and already running." in taken.content.decode()
    assert (reserved.status_code, reserved.url) == (302, f"/leases/{lease.pk}/")
    assert (launched.status_code, launched.url) == (302, f"/vms/{reserved_vm.pk}/")
    assert VirtualMachine.objects.get(pk=reserved_vm.pk).host.name == "sim-3"
