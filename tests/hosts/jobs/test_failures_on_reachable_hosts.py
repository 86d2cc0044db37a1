"""A start, migration or stop that fails on a host that answers is that operation's failure on
that host, in libvirt's own words for those who see the hosts and in plain words for the VM's
users; never a lost host. A start falls back to the next host as the placement says.

Real QEMU hosts (two session daemons); a guest with no system boots to its firmware, so no
guest system boots here. A host fails a VM by a file in its way: a non-empty folder where
QEMU's serial log of that VM (``<pool>/<uuid>.log``) is to be written.
"""

import os
import shutil
import signal
import threading

import libvirt
import pytest

from hosts import driver, jobs, sync
from hosts.driver.libvirt import volumes
from hosts.host_choice import decision, place
from hosts.models import Host, Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import unique, wait_until
from tests.portal import signed_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def qemu_cluster(qemu_daemons, make_cluster):
    """Both QEMU hosts in a cluster of their own, synced; the daemon of each host by its pk.
    What the test's VMs leave on the hosts is removed afterwards."""
    cluster = make_cluster()
    daemons = {}
    for daemon in qemu_daemons:
        host = Host.objects.create(name=unique("qemu"), cluster=cluster, uri=daemon.uri)
        sync.sync_host(host.pk)
        daemons[host.pk] = daemon
    yield cluster, daemons
    for vm in VirtualMachine.objects.filter(cluster=cluster):
        for daemon in qemu_daemons:
            driver.undefine(daemon.uri, str(vm.uuid))
            volumes.delete(daemon.uri, "corral", f"{vm.uuid}.qcow2")
            shutil.rmtree(daemon.pool_directory / f"{vm.uuid}.log", ignore_errors=True)
            driver.remove_guest_files(daemon.uri, str(vm.uuid), "corral")


@pytest.fixture
def firmware_vm(qemu_cluster, make_template, make_vm):
    """A VM of the QEMU cluster whose disk is blank (its guest runs its firmware only)."""
    cluster, _ = qemu_cluster
    template = make_template(vcpus=1, memory_mb=128, disk_gb=1, graphics="none")
    return make_vm(cluster=cluster, template=template)


def _in_the_way(daemon, vm) -> None:
    """What makes ``daemon``'s host fail the VM: a folder where its serial log goes."""
    (daemon.pool_directory / f"{vm.uuid}.log" / "in-the-way").mkdir(parents=True)


def _ranked(vm, purpose: str = "start") -> list[Host]:
    with decision(vm.cluster_id):
        return place(vm, purpose=purpose).hosts


def _run(kind: str, vm, requested_by) -> Job:
    job = jobs.submit(kind, vm=vm, requested_by=requested_by)
    jobs.run(job.pk, OPERATION_BY_KIND)
    return Job.objects.get(pk=job.pk)


def _all_up(hosts) -> list[tuple[str, str]]:
    """Each host's status and reason after a sync."""
    for host in hosts:
        sync.sync_host(host.pk)
    return [
        (host.status, host.status_reason)
        for host in Host.objects.filter(pk__in=[host.pk for host in hosts])
    ]


def test_a_start_that_fails_on_a_host_that_answers_runs_on_the_next_host(
    qemu_cluster, firmware_vm, admin_user
):
    _, daemons = qemu_cluster
    vm = firmware_vm
    first, second = _ranked(vm)
    _in_the_way(daemons[first.pk], vm)

    job = _run(JobKind.START, vm, admin_user)

    assert job.state == "succeeded", job.error_message
    vm.refresh_from_db()
    assert (vm.status, vm.host_id) == ("up", second.pk)
    assert driver.domain_power_state(second.uri, str(vm.uuid)) == "running"
    assert driver.domain_power_state(first.uri, str(vm.uuid)) is None
    tried = job.result["attempts"]
    assert [(a["host"], a["outcome"]) for a in tried] == [
        (first.name, "failed"),
        (second.name, "succeeded"),
    ]
    assert tried[0]["code"] == "driver_error"
    assert tried[0]["reason"] == "Could not start the VM: it failed on the host."
    failed = job.journal.get(message__startswith=f"Starting on {first.name} failed")
    assert "Unable to open file" in failed.detail and "Is a directory" in failed.detail
    assert _all_up([first, second]) == [("up", ""), ("up", "")]


def test_a_start_that_every_host_fails_names_libvirts_reason_to_admins_only(
    qemu_cluster, firmware_vm, admin_user, make_user, grant, client_for
):
    _, daemons = qemu_cluster
    vm = firmware_vm
    for daemon in daemons.values():
        _in_the_way(daemon, vm)
    user = make_user()
    grant(user, "UserRole", vm)

    job = _run(JobKind.START, vm, user)

    assert (job.state, job.error_code) == ("failed", "driver_error")
    assert "failed on 2 host(s)" in job.error_message
    assert job.error_message.endswith("last: Could not start the VM: it failed on the host.")
    hosts = list(Host.objects.filter(pk__in=daemons))
    for host in hosts:
        assert f"{host.name}: {host.uri}: Unable to open file" in job.error_detail
    assert _all_up(hosts) == [("up", ""), ("up", "")]
    # The admins read libvirt's words on the job, the VM's page and the admin console; the
    # VM's user reads the message alone.
    shown = client_for(admin_user).get(f"/api/jobs/{job.pk}/").json()["error"]
    assert shown == {
        "code": "driver_error",
        "message": job.error_message,
        "detail": job.error_detail,
    }
    assert "detail" not in client_for(user).get(f"/api/jobs/{job.pk}/").json()["error"]
    portal = f"/vms/{vm.pk}/"
    assert "Is a directory" in signed_in(admin_user).get(portal).content.decode()
    page = signed_in(user).get(portal).content.decode()
    assert job.error_message in page and "Is a directory" not in page
    progress = f"/jobs/{job.pk}/"  # the job's own part of the page, refreshed as it runs
    assert "Is a directory" in signed_in(admin_user).get(progress).content.decode()
    assert "Is a directory" not in signed_in(user).get(progress).content.decode()
    admin_page = signed_in(admin_user).get(f"/admin/hosts/virtualmachine/{vm.pk}/change/")
    assert "Is a directory" in admin_page.content.decode()
    job_page = signed_in(admin_user).get(f"/admin/hosts/job/{job.pk}/change/")
    assert "Is a directory" in job_page.content.decode()


def test_a_migration_a_destination_that_answers_fails_leaves_the_vm_running_where_it_was(
    qemu_cluster, firmware_vm, admin_user
):
    _, daemons = qemu_cluster
    vm = firmware_vm
    assert _run(JobKind.START, vm, admin_user).state == "succeeded"
    vm.refresh_from_db()
    source = vm.host
    (destination,) = [host for host in Host.objects.filter(pk__in=daemons) if host != source]
    _in_the_way(daemons[destination.pk], vm)

    job = _run(JobKind.MIGRATE, vm, admin_user)

    assert (job.state, job.error_code) == ("failed", "driver_error")
    assert "it failed on the host" in job.error_message
    assert "host_unreachable" not in [a["code"] for a in job.result["attempts"]]
    assert job.error_detail.startswith(f"{destination.name}: {source.uri} -> {destination.uri}: ")
    assert "Unable to open file" in job.error_detail
    vm.refresh_from_db()
    assert (vm.status, vm.host_id) == ("up", source.pk)
    assert driver.domain_power_state(source.uri, str(vm.uuid)) == "running"
    assert _all_up([source, destination]) == [("up", ""), ("up", "")]


@pytest.mark.slow
def test_a_shutdown_a_hung_qemu_never_takes_fails_in_libvirts_words_and_the_host_stays_up(
    qemu_cluster, firmware_vm, admin_user
):
    _, daemons = qemu_cluster
    vm = firmware_vm
    assert _run(JobKind.START, vm, admin_user).state == "succeeded"
    vm.refresh_from_db()
    daemon = daemons[vm.host_id]
    qemu = int((daemon.directory / "run/libvirt/qemu/run" / f"{vm.domain}.pid").read_text())
    os.kill(qemu, signal.SIGSTOP)  # a hung QEMU on a host that answers well
    # Another client's call waits on it, holding the domain meanwhile: the shutdown waits for
    # that, and libvirt gives up after 30 s.
    other = libvirt.open(daemon.uri)
    domain = other.lookupByUUIDString(str(vm.uuid))
    holder = threading.Thread(target=domain.suspend, daemon=True)
    holder.start()
    try:
        wait_until(
            lambda: domain.controlInfo()[0] == libvirt.VIR_DOMAIN_CONTROL_OCCUPIED,
            timeout=10,
            message="the other client's call never reached the hung QEMU",
        )
        job = _run(JobKind.SHUTDOWN, vm, admin_user)
    finally:
        os.kill(qemu, signal.SIGCONT)
        holder.join(timeout=30)
        other.close()

    assert (job.state, job.error_code) == ("failed", "driver_error")
    assert job.error_message == "Could not shut the VM down: the host took too long."
    assert "cannot acquire state change lock" in job.error_detail
    assert _all_up([vm.host]) == [("up", "")]
