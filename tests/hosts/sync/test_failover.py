"""Restart elsewhere: a host NonResponsive past CORRAL_HOST_DOWN_GRACE and confirmed down by an
admin has its highly available VMs started on other hosts through the scheduler; never before
that confirmation, and never its other VMs. On simulated hosts and the real task cluster."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import driver, sync
from hosts.models import Host, Job, JobKind, VirtualMachine
from hosts.operations import spec_for
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _vm(client, vm) -> dict:
    return client.get(f"/api/vms/{vm.pk}/").json()


def test_nothing_restarts_before_the_host_is_confirmed_down(
    lost_host, sim_hosts, admin_user, client_for, settings, time_machine
):
    settings.CORRAL_HOST_DOWN_GRACE = 60
    host, vms = lost_host
    client = client_for(admin_user)

    early = client.post(f"/api/hosts/{host.pk}/confirm-down/")
    time_machine.move_to(timezone.now() + timedelta(seconds=3600), tick=False)
    for _ in range(3):  # an hour of syncs: the host might still run its VMs
        for each in (*sim_hosts, host):
            sync.sync_host(each.pk)

    assert early.status_code == 409
    assert "may be confirmed down once it has not for 60 s" in early.json()["detail"]
    assert not Job.objects.filter(kind__in=[JobKind.START, JobKind.FAILOVER]).exists()
    for vm in vms.values():
        assert (_vm(client, vm)["status"], _vm(client, vm)["host"]) == ("unknown", host.pk)
    up = client.post(f"/api/hosts/{sim_hosts[0].pk}/confirm-down/")
    assert up.status_code == 409
    assert "only a host that does not respond" in up.json()["detail"]


def test_confirmed_down_its_ha_vms_run_on_other_hosts_and_the_others_stay_down(
    lost_host, sim_hosts, admin_user, client_for, settings, task_cluster
):
    settings.CORRAL_HOST_DOWN_GRACE = 0
    host, vms = lost_host
    task_cluster()
    client = client_for(admin_user)

    response = client.post(f"/api/hosts/{host.pk}/confirm-down/")

    assert response.status_code == 202, response.json()
    job_id = response.json()["id"]
    wait_until(lambda: _vm(client, vms["ha"])["status"] == "up", timeout=60)
    ha = _vm(client, vms["ha"])
    assert ha["host"] in {h.pk for h in sim_hosts}
    assert driver.domain_power_state(Host.objects.get(pk=ha["host"]).uri, str(vms["ha"].uuid)) == (
        "running"
    )
    for key in ("plain", "ha_stopped"):
        assert (_vm(client, vms[key])["status"], _vm(client, vms[key])["host"]) == ("down", None)
    job = client.get(f"/api/jobs/{job_id}/").json()
    assert job["state"] == "succeeded"
    assert job["result"]["restarted"] == [vms["ha"].name]
    journal = [line["message"] for line in job["journal"]]
    assert any(
        line.startswith(f"VM {vms['ha'].name} is highly available: starting") for line in journal
    )
    assert f"VM {vms['plain'].name} is not highly available: left Down" in journal
    assert client.get(f"/api/hosts/{host.pk}/").json()["confirmed_down_at"] is not None
    again = client.post(f"/api/hosts/{host.pk}/confirm-down/")
    assert again.status_code == 409


def test_a_cluster_that_restarts_elsewhere_restarts_every_vm_that_ran(
    lost_host, admin_user, client_for, settings, task_cluster
):
    settings.CORRAL_HOST_DOWN_GRACE = 0
    host, vms = lost_host
    client = client_for(admin_user)
    changed = client.patch(
        f"/api/clusters/{host.cluster_id}/", {"restart_elsewhere": True}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["restart_elsewhere"] is True
    task_cluster()

    assert client.post(f"/api/hosts/{host.pk}/confirm-down/").status_code == 202

    for key in ("ha", "plain"):
        wait_until(lambda key=key: _vm(client, vms[key])["status"] == "up", timeout=60)
    assert _vm(client, vms["ha_stopped"])["status"] == "down"


def test_only_who_may_change_the_host_confirms_it_down(
    sim_hosts, make_user, make_role, grant, client_for
):
    host = sim_hosts[0]
    viewer, admin, stranger = make_user(), make_user(), make_user()
    grant(viewer, make_role("HostViewer", ["hosts.view_host"]).name, host.cluster)
    grant(admin, "ClusterAdmin", host.cluster)

    assert client_for(stranger).post(f"/api/hosts/{host.pk}/confirm-down/").status_code == 404
    assert client_for(viewer).post(f"/api/hosts/{host.pk}/confirm-down/").status_code == 403
    allowed = client_for(admin).post(f"/api/hosts/{host.pk}/confirm-down/")
    assert allowed.status_code == 409  # allowed; refused only because the host is Up
    assert Host.objects.get(pk=host.pk).confirmed_down_at is None


def test_a_vm_is_made_highly_available_through_the_api(sim_vm, admin_user, client_for):
    vm = sim_vm()
    client = client_for(admin_user)
    assert _vm(client, vm)["highly_available"] is False

    response = client.patch(f"/api/vms/{vm.pk}/", {"highly_available": True}, format="json")

    assert response.status_code == 200, response.json()
    assert VirtualMachine.objects.get(pk=vm.pk).highly_available is True


def test_a_stopped_copy_left_on_a_returning_host_does_not_stop_the_vm_restarted_elsewhere(
    running_vm, sim_hosts, admin_user, client_for
):
    vm = running_vm()
    elsewhere = next(h for h in sim_hosts if h.pk != vm.host_id)
    driver.define(elsewhere.uri, spec_for(vm))  # the copy on the host that was lost

    for host in sim_hosts:
        sync.sync_host(host.pk)

    shown = client_for(admin_user).get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["host"]) == ("up", vm.host_id)
    driver.undefine(elsewhere.uri, str(vm.uuid))
