"""A shutdown the guest ignores ends in a power off after CORRAL_SHUTDOWN_TIMEOUT (clean
first, then hard), on the real task cluster: the VM ends Down and the journal says so."""

import re

import libvirt
import pytest

from hosts import driver
from hosts.models import Job
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _ignore_shutdown(vm) -> None:
    """Outside Corral: restart the VM's domain with its power-off action set to restart, so
    it ignores a shutdown request (the test driver restarts it, as a guest that ignores ACPI
    keeps running)."""
    conn = libvirt.open(vm.host.uri)
    try:
        dom = conn.lookupByUUIDString(str(vm.uuid))
        xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        xml = re.sub(r"<on_poweroff>\w+</on_poweroff>", "", xml)
        xml = xml.replace("</domain>", "<on_poweroff>restart</on_poweroff></domain>")
        dom.destroy()
        conn.defineXML(xml).create()
    finally:
        conn.close()


def _finished(client, job_id: int) -> dict:
    def done():
        shown = client.get(f"/api/jobs/{job_id}/").json()
        return shown if shown["state"] in ("succeeded", "failed", "cancelled") else None

    return wait_until(done, timeout=40, message=lambda: Job.objects.get(pk=job_id).step)


def test_a_guest_that_ignores_shutdown_is_powered_off_after_the_timeout(
    running_vm, task_cluster, admin_user, client_for
):
    vm = running_vm()
    _ignore_shutdown(vm)
    task_cluster(CORRAL_SHUTDOWN_TIMEOUT="1")
    client = client_for(admin_user)

    job = _finished(client, client.post(f"/api/vms/{vm.pk}/shutdown/").json()["id"])

    assert job["state"] == "succeeded", job
    assert job["result"]["powered_off"] is True
    journal = [line["message"] for line in job["journal"]]
    asked = journal.index("Asking the guest to shut down")
    forced = journal.index("The guest did not shut down within 1 s: powering off")
    assert asked < forced
    assert client.get(f"/api/vms/{vm.pk}/").json()["status"] == "down"
    assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "shutoff"


def test_a_guest_that_shuts_down_is_never_powered_off(
    running_vm, task_cluster, admin_user, client_for
):
    vm = running_vm()
    task_cluster(CORRAL_SHUTDOWN_TIMEOUT="1")
    client = client_for(admin_user)

    job = _finished(client, client.post(f"/api/vms/{vm.pk}/shutdown/").json()["id"])

    assert job["state"] == "succeeded", job
    assert "powered_off" not in job["result"]
    assert not any("powering off" in line["message"] for line in job["journal"])
    assert client.get(f"/api/vms/{vm.pk}/").json()["status"] == "down"
