"""A host that dies: NonResponsive, its VMs Unknown (never Down), reconciled when it is back."""

import pytest

from hosts import driver, sync
from hosts.models import Host, VirtualMachine
from hosts.operations import spec_for
from lab import simhosts
from project.models import Event, EventKind


@pytest.fixture
def failing_host(fragile_daemon, make_cluster, make_vm, make_template):
    """(host, running VM, stopped VM) on the own daemon, all as the host reported them."""
    host = Host.objects.create(
        name=fragile_daemon.name, cluster=make_cluster(), uri=fragile_daemon.uri
    )
    sync.sync_host(host.pk)
    template = make_template(memory_mb=128)
    vms = []
    for running in (True, False):
        vm = make_vm(cluster=host.cluster, template=template, host=host)
        driver.define(host.uri, spec_for(vm))
        if running:
            driver.start(host.uri, str(vm.uuid))
        vms.append(vm)
    sync.sync_host(host.pk)
    running_vm, stopped_vm = (VirtualMachine.objects.get(pk=vm.pk) for vm in vms)
    assert (running_vm.status, stopped_vm.status) == ("up", "down")
    return host, running_vm, stopped_vm


def _shown(client, kind: str, pk: int) -> dict:
    return client.get(f"/api/{kind}/{pk}/").json()


def _host_alerts(host) -> list[str]:
    return list(
        Event.objects.filter(
            kind=EventKind.ALERT, object_type="host", object_id=host.pk
        ).values_list("message", flat=True)
    )


def test_a_dead_host_is_non_responsive_and_its_vms_unknown_never_down(
    failing_host, fragile_daemon, admin_user, client_for
):
    host, running_vm, stopped_vm = failing_host
    simhosts.kill(fragile_daemon)

    sync.sync_host(host.pk)

    client = client_for(admin_user)
    shown_host = _shown(client, "hosts", host.pk)
    assert shown_host["status"] == "non_responsive"
    assert shown_host["status_detail"]
    for vm in (running_vm, stopped_vm):
        shown = _shown(client, "vms", vm.pk)
        assert (shown["status"], shown["power_state"], shown["host"]) == (
            "unknown",
            "unknown",
            host.pk,
        )


def test_a_dead_host_raises_one_alert_however_often_it_is_synced(failing_host, fragile_daemon):
    host, _, _ = failing_host
    simhosts.kill(fragile_daemon)

    for _ in range(3):
        sync.sync_host(host.pk)

    alerts = _host_alerts(host)
    assert len(alerts) == 1
    assert alerts[0].startswith(f"Host {host.name} is not responding")


def test_a_vm_on_a_dead_host_cannot_be_operated(
    failing_host, fragile_daemon, admin_user, client_for
):
    host, running_vm, _ = failing_host
    simhosts.kill(fragile_daemon)
    sync.sync_host(host.pk)

    response = client_for(admin_user).post(f"/api/vms/{running_vm.pk}/poweroff/")

    assert response.status_code == 409
    assert "not responding" in response.json()["detail"]


def test_a_restarted_host_is_up_and_its_vms_take_what_it_reports(
    failing_host, fragile_daemon, admin_user, client_for
):
    host, running_vm, stopped_vm = failing_host
    simhosts.kill(fragile_daemon)
    sync.sync_host(host.pk)
    simhosts.start(fragile_daemon)  # the test driver forgets its domains on a restart

    sync.sync_host(host.pk)

    # The first report of a host that is back lists what it has: what it lost is gone at once.
    client = client_for(admin_user)
    assert _shown(client, "hosts", host.pk)["status"] == "up"
    for vm in (running_vm, stopped_vm):
        shown = _shown(client, "vms", vm.pk)
        assert (shown["status"], shown["power_state"], shown["host"]) == (
            "down",
            "report_missing",
            None,
        )
    assert Event.objects.filter(object_type="host", message=f"Host {host.name} is Up").exists()
