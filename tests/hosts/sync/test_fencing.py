"""Fencing through hooks: a host NonResponsive past CORRAL_HOST_DOWN_GRACE whose VMs would
restart elsewhere has its host-fence hooks run, once per outage; all exiting 0 confirm it down
and its highly available VMs start on other hosts; a failure confirms nothing and alerts."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import driver, jobs, sync
from hosts.models import Host, Job, JobKind
from hosts.operations import OPERATION_BY_KIND
from lab import simhosts

pytestmark = pytest.mark.django_db(transaction=True)


def _vm(client, vm) -> dict:
    return client.get(f"/api/vms/{vm.pk}/").json()


def _host(client, host) -> dict:
    return client.get(f"/api/hosts/{host.pk}/").json()


def _past_the_grace(time_machine, settings, seconds: float = 1) -> None:
    settings.CORRAL_HOST_DOWN_GRACE = 60
    time_machine.move_to(timezone.now() + timedelta(seconds=60 + seconds))


def test_a_fence_hook_that_succeeds_confirms_the_host_down_and_its_ha_vm_runs_elsewhere(
    lost_host, sim_hosts, hooks_dir, admin_user, client_for, settings, time_machine
):
    host, vms = lost_host
    hooks_dir("host-fence", "10-power-off", "exit 0")
    client = client_for(admin_user)
    sync.sync_host(host.pk)  # within the grace: nothing is fenced yet
    assert _host(client, host)["confirmed_down_at"] is None

    _past_the_grace(time_machine, settings)
    sync.sync_host(host.pk)

    shown = _host(client, host)
    assert shown["confirmed_down_at"] is not None
    assert shown["confirmed_down_by"] == "hook host-fence/10-power-off"
    assert shown["status_detail"] == "Fenced by hook host-fence/10-power-off: confirmed down."
    failover = Job.objects.get(kind=JobKind.FAILOVER, host=host)
    assert (
        jobs.run(failover.pk, OPERATION_BY_KIND) == "succeeded"
    )  # as a task worker would, in the moved time
    assert (
        jobs.run(Job.objects.get(kind=JobKind.START, vm=vms["ha"]).pk, OPERATION_BY_KIND)
        == "succeeded"
    )
    assert _vm(client, vms["ha"])["status"] == "up"
    ha = _vm(client, vms["ha"])
    assert ha["host"] in {h.pk for h in sim_hosts}
    assert driver.domain_power_state(Host.objects.get(pk=ha["host"]).uri, str(vms["ha"].uuid)) == (
        "running"
    )
    assert (_vm(client, vms["plain"])["status"], _vm(client, vms["plain"])["host"]) == (
        "down",
        None,
    )
    journal = [
        line["message"] for line in client.get(f"/api/jobs/{failover.pk}/").json()["journal"]
    ]
    assert f"Host {host.name} was fenced by hook host-fence/10-power-off" in journal
    messages = [e["message"] for e in client.get("/api/events/", {"since": 0}).json()["events"]]
    assert (
        f"Host {host.name} was confirmed down by hook host-fence/10-power-off (fenced); "
        "its highly available VMs restart elsewhere" in messages
    )


def test_a_fence_hook_that_fails_restarts_nothing_alerts_and_is_not_run_again(
    lost_host, hooks_dir, admin_user, client_for, settings, time_machine, tmp_path
):
    host, vms = lost_host
    runs = tmp_path / "runs"
    hooks_dir("host-fence", "10-ipmi", f'echo run >> {runs}\necho "BMC unreachable" >&2\nexit 1')
    client = client_for(admin_user)

    _past_the_grace(time_machine, settings)
    sync.sync_host(host.pk)
    time_machine.shift(timedelta(seconds=30))  # the next syncs, within the grace
    sync.sync_host(host.pk)
    sync.sync_host(host.pk)

    assert runs.read_text().splitlines() == ["run"]
    assert _host(client, host)["confirmed_down_at"] is None
    assert not Job.objects.filter(kind__in=[JobKind.START, JobKind.FAILOVER]).exists()
    for vm in vms.values():
        assert (_vm(client, vm)["status"], _vm(client, vm)["host"]) == ("unknown", host.pk)
    alerts = [
        e["message"]
        for e in client.get("/api/events/", {"since": 0}).json()["events"]
        if "was not fenced" in e["message"]
    ]
    assert alerts == [
        f"Host {host.name} was not fenced: Hook host-fence/10-ipmi exited 1: BMC unreachable. "
        "It is not confirmed down; an admin may confirm it down once it is off."
    ]
    # The admin's confirmation is still the way forward.
    assert client.post(f"/api/hosts/{host.pk}/confirm-down/").status_code == 202


def test_without_a_fence_hook_only_an_admin_confirms_the_host_down(
    lost_host, hooks_dir, admin_user, client_for, settings, time_machine, tmp_path
):
    host, _ = lost_host
    started = tmp_path / "started"
    hooks_dir("vm-pre-start", "10-note", f"touch {started}")  # hooks, but none to fence
    client = client_for(admin_user)

    _past_the_grace(time_machine, settings, seconds=3600)
    sync.sync_host(host.pk)

    shown = _host(client, host)
    assert (shown["confirmed_down_at"], shown["fence_tried_at"]) == (None, None)
    assert not Job.objects.filter(kind__in=[JobKind.START, JobKind.FAILOVER]).exists()
    assert not started.exists()
    assert client.post(f"/api/hosts/{host.pk}/confirm-down/").status_code == 202
    assert _host(client, host)["confirmed_down_by"] == admin_user.get_username()


def test_the_fence_hook_is_told_which_host_to_fence(
    lost_host, hooks_dir, settings, time_machine, tmp_path
):
    host, _ = lost_host
    told = tmp_path / "told"
    hooks_dir(
        "host-fence",
        "10-record",
        f'printf "%s\\n" "$CORRAL_HOST_ID" "$CORRAL_HOST_NAME" "$CORRAL_HOST_URI" > {told}',
    )

    _past_the_grace(time_machine, settings)
    sync.sync_host(host.pk)

    assert told.read_text().splitlines() == [str(host.pk), host.name, host.uri]
    assert Host.objects.get(pk=host.pk).confirmed_down_at is not None


def test_a_host_that_answers_before_the_grace_is_never_fenced(
    lost_host, fragile_daemon, hooks_dir, settings, time_machine, tmp_path
):
    host, _ = lost_host
    runs = tmp_path / "runs"
    hooks_dir("host-fence", "10-ipmi", f"echo run >> {runs}")
    settings.CORRAL_HOST_DOWN_GRACE = 60
    simhosts.start(fragile_daemon)
    sync.sync_host(host.pk)  # it answers again

    time_machine.move_to(timezone.now() + timedelta(seconds=3600))
    sync.sync_host(host.pk)

    assert not runs.exists()
    assert Host.objects.get(pk=host.pk).status == "up"
