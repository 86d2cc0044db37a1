"""An administrator works behind Corral's back, through a second libvirt connection, while a
task cluster runs: destroys one of a pool's prestarted VMs and starts a VM Corral has as Down.

The database follows the hosts within one sync interval (plus slack for a loaded machine:
SYNC_INTERVAL_S + SLACK_S), each change nobody asked for raises an alert, and the pool is back
at its prestarted level soon after; no VM is left differing from what its host reports.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import libvirt
import pytest
from django.utils import timezone

from hosts import driver, sync
from hosts.models import Host, VirtualMachine
from hosts.operations import spec_for
from lab.hostview import active_jobs, disagreements
from pools.models import VmPool
from project.models import Event, EventKind
from tests.conftest import wait_until

pytestmark = pytest.mark.slow

SYNC_INTERVAL_S = 3.0
SLACK_S = 3.0
FOLLOW_BOUND_S = SYNC_INTERVAL_S + SLACK_S
MONITOR_INTERVAL_S = 2.0
SETTLE_S = 60
PRESTARTED = 2
CLUSTER_ENV = {
    "CORRAL_SYNC_INTERVAL": str(SYNC_INTERVAL_S),
    "VMPOOL_MONITOR_INTERVAL": str(MONITOR_INTERVAL_S),
    "CORRAL_TICKER_RUN_SECONDS": "10",
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "20",
}


@contextlib.contextmanager
def outside(host: Host):
    """A second libvirt connection to the host, as an administrator working behind Corral."""
    conn = libvirt.open(host.uri)
    try:
        yield conn
    finally:
        conn.close()


def _at_level(pool: VmPool, vms) -> bool:
    if active_jobs(vms) or disagreements(vms):
        return False
    counts = VmPool.objects.with_counts().get(pk=pool.pk)
    return (counts.running_unassigned, counts.starting_vms) == (PRESTARTED, 0)


def _alert(vm: VirtualMachine, message: str) -> Event | None:
    return Event.objects.filter(
        kind=EventKind.ALERT, object_type="vm", object_id=vm.pk, message=message
    ).first()


def test_changes_made_behind_corrals_back_are_followed_alerted_and_the_pool_refilled(
    real_pool, sim_vm, sim_hosts, task_cluster
):
    pool = real_pool(size=4, prestarted_vms=PRESTARTED)
    stopped = sim_vm()
    driver.define(sim_hosts[0].uri, spec_for(stopped))
    VirtualMachine.objects.filter(pk=stopped.pk).update(host=sim_hosts[0])
    stopped = sync.reconcile_vm(stopped.pk)
    assert (stopped.status, stopped.power_state) == ("down", "shutoff")
    vms = [*VirtualMachine.objects.filter(pool=pool), stopped]
    cluster = task_cluster(**CLUSTER_ENV)

    def report() -> str:
        counts = VmPool.objects.with_counts().values("running_unassigned", "starting_vms")
        return (
            f"jobs: {active_jobs(vms)}\nVMs: {disagreements(vms)}\n"
            f"pool: {counts.get(pk=pool.pk)}\n{cluster.log()[-3000:]}"
        )

    wait_until(lambda: _at_level(pool, vms), timeout=SETTLE_S, message=report)
    victim = (
        VirtualMachine.objects.filter(pool=pool, status="up", owner__isnull=True)
        .select_related("host")
        .order_by("pool_index")
        .first()
    )

    acted_at = timezone.now()
    with outside(victim.host) as conn:
        conn.lookupByUUIDString(str(victim.uuid)).destroy()
    with outside(stopped.host) as conn:
        conn.lookupByUUIDString(str(stopped.uuid)).create()

    destroyed = f"VM {victim.name} stopped outside Corral"
    started = f"VM {stopped.name} started outside Corral"

    def both_alerts() -> tuple[Event, Event] | None:
        raised = (_alert(victim, destroyed), _alert(stopped, started))
        return raised if all(raised) else None

    alerts = wait_until(
        both_alerts,
        timeout=FOLLOW_BOUND_S,
        message=lambda: (
            f"the DB did not follow the hosts within {FOLLOW_BOUND_S} s: "
            f"{disagreements(vms)}\n{cluster.log()[-3000:]}"
        ),
    )
    bound = timedelta(seconds=FOLLOW_BOUND_S)
    assert [alert.created_at - acted_at < bound for alert in alerts] == [True, True]
    stopped.refresh_from_db()
    assert (stopped.status, stopped.power_state) == ("up", "running")

    wait_until(lambda: _at_level(pool, vms), timeout=SETTLE_S, message=report)
    assert disagreements(vms) == []
    stopped.refresh_from_db()
    assert (stopped.status, stopped.host_id) == ("up", sim_hosts[0].pk)
    vm_alerts = Event.objects.filter(kind=EventKind.ALERT, object_type="vm")
    assert sorted(vm_alerts.values_list("message", flat=True)) == sorted([destroyed, started])
    cluster.kill()
