"""Corral and its hosts stopped and started again, with real task clusters: a user holds a VM
of an automatic, stateless pool on a simulated host.

- As ``make run`` does on Ctrl-C and the next run (the task cluster stopped, then the lab's
  hosts, then both started again): the host keeps its domains, as a real host with
  libvirt-guests does, and nothing changed, nobody is alerted, no job runs.
- The host restarts while Corral is stopped, losing its guests: the user still holds the VM,
  Down, never reverted; one alert names the host's restart, none says "outside Corral".
- While Corral watches the host, a stop behind its back is still one "outside Corral", and the
  pool takes its VM back.
"""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from hosts import driver, sync
from hosts.models import Host, Job, JobKind, VirtualMachine
from lab import simhosts
from project.models import Event, EventKind
from tests.conftest import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SYNC_INTERVAL_S = 1.0
UNSEEN_AFTER_S = 4.0
CLUSTER_ENV = {
    "CORRAL_SYNC_INTERVAL": str(SYNC_INTERVAL_S),
    "CORRAL_HOST_UNSEEN_AFTER": str(UNSEEN_AFTER_S),
    "CORRAL_TICKER_RUN_SECONDS": "10",
    "VMPOOL_MONITOR_INTERVAL": "2",
}
SETTLE_S = 60


@pytest.fixture
def held(fragile_daemon, make_cluster, held_on):
    """(host, vm, user, client): a user holds a running VM of an automatic, stateless pool
    (two VMs, the other kept running) on a host of its own daemon."""
    host = Host.objects.create(
        name=fragile_daemon.name, cluster=make_cluster(), uri=fragile_daemon.uri
    )
    sync.sync_host(host.pk)
    return host, *held_on(host, size=2)


def _synced_by_a_task_cluster_since(host: Host, moment) -> bool:
    seen = Host.objects.get(pk=host.pk).last_seen_at
    return seen is not None and seen > moment


def _start_corral(task_cluster, host: Host):
    """A task cluster, once its syncer has read the host."""
    started = timezone.now()
    cluster = task_cluster(**CLUSTER_ENV)
    wait_until(
        lambda: _synced_by_a_task_cluster_since(host, started),
        timeout=SETTLE_S,
        message=lambda: f"the host was never synced: {cluster.log()[-3000:]}",
    )
    return cluster


def _alerts_since(event_id: int) -> list[str]:
    alerts = Event.objects.filter(kind=EventKind.ALERT, pk__gt=event_id).order_by("pk")
    return list(alerts.values_list("message", flat=True))


def test_corral_and_its_lab_host_stopped_and_started_again_change_nothing(
    held, fragile_daemon, task_cluster
):
    host, vm, user, client = held
    pool_vms = list(VirtualMachine.objects.filter(pool=vm.pool).order_by("pk"))
    before = [(each.pk, each.status, each.host_id, each.owner_id) for each in pool_vms]
    _start_corral(task_cluster, host).kill()  # Ctrl-C: the task cluster stops first,
    simhosts.stop(fragile_daemon)  # then the lab's hosts (manage.py simhosts stop)
    last_event, last_job = Event.objects.latest("pk").pk, Job.objects.latest("pk").pk

    simhosts.start(fragile_daemon)  # the next make run
    _start_corral(task_cluster, host)
    time.sleep(3 * SYNC_INTERVAL_S)  # a few more syncs (the task cluster's own clock)

    after = [
        (each.pk, each.status, each.host_id, each.owner_id)
        for each in VirtualMachine.objects.filter(pool=vm.pool).order_by("pk")
    ]
    assert after == before
    assert driver.domain_power_state(host.uri, str(vm.uuid)) == "running"
    assert _alerts_since(last_event) == []
    assert not Job.objects.filter(pk__gt=last_job).exists()
    shown = client.get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["owner"]) == ("up", user.username)


def test_a_host_that_restarted_while_corral_was_stopped_leaves_the_user_their_vm(
    held, fragile_daemon, task_cluster
):
    host, vm, user, client = held
    _start_corral(task_cluster, host).kill()
    last_event = Event.objects.latest("pk").pk
    simhosts.kill(fragile_daemon)  # the host restarts and its guests do not survive
    simhosts.start(fragile_daemon)
    time.sleep(UNSEEN_AFTER_S + 1)  # Corral stays stopped longer than that (real time)

    cluster = task_cluster(**CLUSTER_ENV)
    wait_until(
        lambda: VirtualMachine.objects.get(pk=vm.pk).status == "down",
        timeout=SETTLE_S,
        message=lambda: f"the VM never went Down: {cluster.log()[-3000:]}",
    )
    time.sleep(3 * SYNC_INTERVAL_S)  # what a pool would do on a stop has had its time

    shown = client.get(f"/api/vms/{vm.pk}/")
    assert shown.status_code == 200
    assert (shown.json()["status"], shown.json()["owner"]) == ("down", user.username)
    assert not Job.objects.filter(vm=vm, kind=JobKind.REVERT).exists()
    alerts = _alerts_since(last_event)
    assert len(alerts) == 1, alerts
    assert alerts[0].startswith(f"Host {host.name} is back after Corral lost sight of it")
    assert f"as when a host restarts, not by anyone's hand: {vm.name}" in alerts[0]


def test_while_corral_watches_a_stop_behind_its_back_still_returns_the_vm(
    held, fragile_daemon, task_cluster
):
    host, vm, user, client = held
    cluster = _start_corral(task_cluster, host)
    time.sleep(UNSEEN_AFTER_S + 1)  # watched all along, for longer than that
    last_event = Event.objects.latest("pk").pk

    driver.power_off(host.uri, str(vm.uuid))

    wait_until(
        lambda: client.get(f"/api/vms/{vm.pk}/").status_code == 404,
        timeout=SETTLE_S,
        message=lambda: f"the VM never returned to its pool: {cluster.log()[-3000:]}",
    )
    assert _alerts_since(last_event) == [f"VM {vm.name} stopped outside Corral"]
    assert Job.objects.filter(vm=vm, kind=JobKind.REVERT).exists()
