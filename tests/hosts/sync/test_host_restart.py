"""A host that restarts while Corral cannot see it: the VMs that ran there stopped with the host,
not by their users' hand. A user's VM taken from an automatic, stateless pool stays theirs,
Down (never reverted nor returned), and one alert on the host says what happened — whether
Corral itself was stopped meanwhile (``make run`` stopped and started again), the host stopped
responding, or an admin confirmed it down."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import driver, sync
from hosts.models import Host, Job, JobKind
from hosts.operations import spec_for
from lab import simhosts
from project.models import Event, EventKind
from tests.pools.fixtures import run_queued_tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held(fragile_daemon, make_cluster, held_on):
    """(host, vm, user, client): a user holds a running VM of an automatic, stateless pool, on
    a host of its own daemon (free to restart)."""
    host = Host.objects.create(
        name=fragile_daemon.name, cluster=make_cluster(), uri=fragile_daemon.uri
    )
    sync.sync_host(host.pk)
    return host, *held_on(host)


def _restart(daemon) -> None:
    """The host restarts: its running guest does not survive (the test driver keeps nothing
    of a daemon that was killed)."""
    simhosts.kill(daemon)
    simhosts.start(daemon)


def _alerts() -> list[str]:
    return list(
        Event.objects.filter(kind=EventKind.ALERT).order_by("pk").values_list("message", flat=True)
    )


def _assert_still_theirs(vm, user, client) -> dict:
    shown = client.get(f"/api/vms/{vm.pk}/")
    assert shown.status_code == 200
    assert (shown.json()["status"], shown.json()["owner"]) == ("down", user.username)
    assert not Job.objects.filter(vm=vm, kind=JobKind.REVERT).exists()
    assert not any("outside Corral" in alert or "disappeared" in alert for alert in _alerts())
    return shown.json()


def _went_down_with(host, vm) -> str:
    back = [alert for alert in _alerts() if alert.startswith(f"Host {host.name} is back")]
    assert len(back) == 1, _alerts()
    assert f"as when a host restarts, not by anyone's hand: {vm.name}." in back[0]
    assert back[0].endswith("They stay with their holders, Down.")
    return back[0]


def _corral_back_after(time_machine, minutes: float, host) -> None:
    """Corral starts again ``minutes`` later and syncs the host, and again past the grace a
    domain missing from a report has (time passes only when shifted)."""
    time_machine.move_to(timezone.now() + timedelta(minutes=minutes), tick=False)
    sync.sync_host(host.pk)
    time_machine.shift(0.5)
    sync.sync_host(host.pk)
    run_queued_tasks()


def test_a_vm_gone_with_a_host_that_restarted_while_corral_was_stopped_stays_with_its_holder(
    held, fragile_daemon, settings, time_machine
):
    settings.CORRAL_SYNC_INTERVAL = 0.2
    host, vm, user, client = held
    since = Event.objects.latest("pk").pk

    # Corral is stopped (nothing syncs the host); the host restarts meanwhile.
    _restart(fragile_daemon)
    _corral_back_after(time_machine, 10, host)

    shown = _assert_still_theirs(vm, user, client)
    assert shown["host"] is None  # the host has no domain for it: it is defined when started
    _went_down_with(host, vm)
    feed = client.get("/api/events/", {"since": since, "timeout": 0}).json()
    assert (
        f"VM {vm.name} is Down: it stopped with its host {host.name} while Corral lost sight of it"
    ) in [event["message"] for event in feed["events"]]


def test_a_vm_a_restarted_host_kept_defined_is_down_there_and_its_holder_starts_it_again(
    held, fragile_daemon, settings, time_machine
):
    settings.CORRAL_SYNC_INTERVAL = 0.2
    host, vm, user, client = held
    # A KVM host keeps its persistent domains across a reboot, shut off.
    _restart(fragile_daemon)
    driver.define(host.uri, spec_for(vm))
    _corral_back_after(time_machine, 10, host)

    assert _assert_still_theirs(vm, user, client)["host"] == host.pk
    _went_down_with(host, vm)
    assert client.post(f"/api/vms/{vm.pk}/start/").status_code == 202
    run_queued_tasks()
    shown = client.get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["owner"], shown["host"]) == ("up", user.username, host.pk)


def test_a_vm_of_a_host_that_restarted_while_it_did_not_respond_stays_with_its_holder(
    held, fragile_daemon, settings, time_machine
):
    settings.CORRAL_SYNC_INTERVAL = 0.2
    host, vm, user, client = held
    time_machine.move_to(timezone.now(), tick=False)  # time passes only when shifted
    simhosts.kill(fragile_daemon)
    sync.sync_host(host.pk)
    assert client.get(f"/api/vms/{vm.pk}/").json()["status"] == "unknown"

    simhosts.start(fragile_daemon)
    sync.sync_host(host.pk)
    time_machine.shift(0.5)  # past the grace a missing domain would have
    sync.sync_host(host.pk)
    run_queued_tasks()

    _assert_still_theirs(vm, user, client)
    _went_down_with(host, vm)


def test_a_vm_of_a_host_confirmed_down_stays_with_its_holder(
    held, fragile_daemon, admin_user, client_for, settings
):
    settings.CORRAL_HOST_DOWN_GRACE = 0
    host, vm, user, client = held
    simhosts.kill(fragile_daemon)
    sync.sync_host(host.pk)

    confirmed = client_for(admin_user).post(f"/api/hosts/{host.pk}/confirm-down/")
    assert confirmed.status_code == 202, confirmed.json()
    run_queued_tasks()

    assert Job.objects.get(pk=confirmed.json()["id"]).state == "succeeded"
    _assert_still_theirs(vm, user, client)


def test_a_vm_stopped_while_corral_watched_its_host_still_returns_to_its_pool(held):
    host, vm, user, client = held
    sync.sync_host(host.pk)

    driver.power_off(host.uri, str(vm.uuid))
    sync.sync_host(host.pk)
    run_queued_tasks()

    assert client.get(f"/api/vms/{vm.pk}/").status_code == 404
    assert Job.objects.filter(vm=vm, kind=JobKind.REVERT).exists()
    assert _alerts() == [f"VM {vm.name} stopped outside Corral"]
