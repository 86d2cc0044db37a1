"""A host's libvirt daemon dies (kill -9) under a running task cluster, then comes back.

While it is gone the host is NonResponsive within two sync intervals, its VMs are Unknown —
not Down, and not restarted anywhere else although other hosts have room — and the lease
capacity reserved on it moves to another reservable host. When the daemon is back on the same
socket, the host is Up again and its VMs are what it reports: the guest that kept running is
Up, the domain the host lost is Down and placed nowhere.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from hosts import driver, jobs, sync
from hosts.driver.libvirt.connection import drop
from hosts.models import Host, Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND, spec_for
from lab import simhosts
from lab.hostview import disagreements, look
from leases import lifecycle
from leases import services as leases
from leases.models import Allocation, Lease
from project.models import Event, EventKind
from tests.conftest import wait_until
from tests.leases.fixtures import instances

pytestmark = pytest.mark.slow

SYNC_INTERVAL_S = 3.0
NON_RESPONSIVE_BOUND_S = 2 * SYNC_INTERVAL_S
BACK_S = 30
CLUSTER_ENV = {
    "CORRAL_SYNC_INTERVAL": str(SYNC_INTERVAL_S),
    "CORRAL_TICKER_RUN_SECONDS": "10",
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "20",
}


@pytest.fixture
def fragile(sim_cluster, transactional_db):
    """(daemon, host): a simulated host of this test's own, in the simulated cluster, free to
    be killed and restarted; reservable, the only one for now."""
    base = Path(tempfile.mkdtemp(prefix="corral-dying-", dir="/tmp"))
    base.chmod(0o755)
    daemon = simhosts.SimHost(name="fragile", directory=base / "fragile")
    simhosts.start(daemon)
    host = Host.objects.create(
        name=daemon.name, cluster=sim_cluster, uri=daemon.uri, reservable=True
    )
    sync.sync_host(host.pk)
    yield daemon, Host.objects.get(pk=host.pk)
    simhosts.stop(daemon)
    drop(daemon.uri)
    shutil.rmtree(base, ignore_errors=True)


def _run(kind: str, vm: VirtualMachine) -> VirtualMachine:
    job = jobs.submit(kind, vm=vm)
    assert jobs.run(job.pk, OPERATION_BY_KIND) == "succeeded", Job.objects.get(
        pk=job.pk
    ).error_message
    return VirtualMachine.objects.get(pk=vm.pk)


def _allocations(lease: Lease) -> dict[str, int]:
    rows = Allocation.objects.filter(reservation__lease=lease).values_list("host__name", "slots")
    return dict(rows)


def test_a_dead_hosts_vms_are_unknown_its_lease_capacity_moves_and_it_comes_back(
    fragile, sim_hosts, make_vm, small_template, make_user, grant, task_cluster
):
    daemon, host = fragile
    owner = make_user()
    grant(owner, "LeaseUser")
    now = timezone.now()
    lease = leases.create_lease(
        owner=owner,
        name="on-fragile",
        start=now,
        end=now + timedelta(hours=1),
        reservations=[instances(2, vcpus=1, memory_mb=128)],
    )
    lifecycle.start_lease(lease)
    reservation = lease.reservations.get()
    assert _allocations(lease) == {host.name: 2}
    kept, stopped = (
        _run(
            JobKind.START,
            make_vm(cluster=host.cluster, template=small_template, reservation=reservation),
        )
        for _ in range(2)
    )
    stopped = _run(JobKind.POWEROFF, stopped)
    assert [(vm.host_id, vm.status) for vm in (kept, stopped)] == [
        (host.pk, "up"),
        (host.pk, "down"),
    ]
    # Room for the lease elsewhere: another reservable host, added after the lease was made.
    spare = sim_hosts[2]
    Host.objects.filter(pk=spare.pk).update(reservable=True)
    cluster = task_cluster(**CLUSTER_ENV)
    wait_until(
        lambda: VirtualMachine.objects.get(pk=kept.pk).power_state_update_count > 1,
        timeout=60,
        message=lambda: f"the ticker never synced the host: {cluster.log()[-3000:]}",
    )
    starts_before = Job.objects.filter(kind=JobKind.START).count()

    simhosts.kill(daemon)
    died = time.monotonic()

    wait_until(
        lambda: Host.objects.get(pk=host.pk).status == "non_responsive",
        timeout=NON_RESPONSIVE_BOUND_S,
        message=lambda: (
            f"the host was not NonResponsive within {NON_RESPONSIVE_BOUND_S} s "
            f"(two sync intervals): {cluster.log()[-3000:]}"
        ),
    )
    noticed_in = time.monotonic() - died
    wait_until(
        lambda: Event.objects.filter(
            lease_id=lease.pk, message__contains="capacity moved"
        ).exists(),
        timeout=10,
        message=lambda: f"the lease's capacity did not move: {cluster.log()[-3000:]}",
    )
    # The outage lasts a few more sync intervals: time for anything that would restart the
    # VMs elsewhere, or call them Down, to do so.
    time.sleep(2 * SYNC_INTERVAL_S)

    vms = [kept, stopped]
    shown = list(
        VirtualMachine.objects.filter(pk__in=[vm.pk for vm in vms])
        .order_by("pk")
        .values_list("status", "power_state", "host")
    )
    assert shown == [("unknown", "unknown", host.pk)] * 2
    assert disagreements(vms) == []
    assert all(look(sim_hosts).where(vm) == {} for vm in vms)
    assert Job.objects.filter(kind=JobKind.START).count() == starts_before
    alerts = Event.objects.filter(kind=EventKind.ALERT, object_type="host", object_id=host.pk)
    assert [e.message.split(":")[0] for e in alerts] == [f"Host {host.name} is not responding"]
    assert _allocations(lease) == {spare.name: 2}
    assert not Lease.objects.get(pk=lease.pk).degraded

    # The daemon comes back on the same socket. The guest that was running kept running (as
    # on a real host whose libvirtd restarted); the stopped VM's definition was lost.
    simhosts.start(daemon)
    driver.define(daemon.uri, spec_for(kept))
    driver.start(daemon.uri, str(kept.uuid))

    wait_until(
        lambda: Host.objects.get(pk=host.pk).status == "up",
        timeout=NON_RESPONSIVE_BOUND_S + 2,
        message=lambda: f"the host did not come back Up: {cluster.log()[-3000:]}",
    )
    wait_until(
        lambda: not disagreements(vms),
        timeout=BACK_S,
        message=lambda: f"VMs not reconciled: {disagreements(vms)}\n{cluster.log()[-3000:]}",
    )
    kept.refresh_from_db()
    stopped.refresh_from_db()
    assert (kept.status, kept.host_id, kept.power_state) == ("up", host.pk, "running")
    assert (stopped.status, stopped.host_id, stopped.power_state) == (
        "down",
        None,
        "report_missing",
    )
    assert Job.objects.filter(kind=JobKind.START).count() == starts_before
    assert noticed_in <= NON_RESPONSIVE_BOUND_S
    cluster.kill()
