"""Fleet hosts (lab/fleethosts.py): hosts Corral does not run itself, each at its own address on
a bridge, reached over SSH as a real host is. Corral syncs them, boots the tiny guest on one,
moves it live with its disk to the other (and makes an image of it there), and sees a host cut
off the network go NonResponsive and come back. Jobs run in this process, as a task worker
would run them.
"""

import os
import shutil
import subprocess
from io import StringIO

import libvirt
import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.test import Client

from hosts import driver, jobs, sshtrust, sync
from hosts.driver import uris
from hosts.driver.libvirt import volumes
from hosts.driver.libvirt.connection import drop
from hosts.guests import guestinfo, rfb
from hosts.host_choice import decision, place
from hosts.models import ConsoleLog, Host, HostStatus, Image, Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from lab import fleethosts
from tests.conftest import unique, wait_until
from tests.hosts.driver.guests import (
    agent_addresses,
    login,
    ssh_key,
    vnc_login,
    vnc_security_types,
)
from tests.hosts.fixtures import run_pending_jobs
from tests.hosts.guests.test_guest_access import _open_screen, _ticket
from tests.hosts.images.uploads import tiny_guest_template
from tests.hosts.test_real_vm_end_to_end import _volumes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
BOOTED = "corral-guest: booted"
GUEST_SSH_PORTS = (22000, 22009)  # on each fleet host's own address: nothing else is there


@pytest.fixture
def fleet_cluster(fleet_hosts, make_cluster):
    """Both fleet hosts registered in a cluster of their own as an admin adds a KVM host:
    ``qemu+ssh://root@ADDRESS/system``, reached with Corral's own key and ssh command, its host
    key trusted (the admin compared it: here read from the host's key file); what the test's
    VMs leave on them is removed afterwards."""
    cluster = make_cluster()
    hosts = [
        Host.objects.create(
            name=unique(host.name),
            cluster=cluster,
            uri=host.managed_uri,
            ssh_host_key=host.host_key,
            storage_path=host.pool_path,
            # Guests with a user-mode NIC (fleet hosts have no libvirt network) publish their
            # SSH on the host's address.
            guest_ssh_port_min=GUEST_SSH_PORTS[0],
            guest_ssh_port_max=GUEST_SSH_PORTS[1],
        )
        for host in fleet_hosts
    ]
    yield cluster, hosts
    for vm in VirtualMachine.objects.filter(cluster=cluster):
        for host in hosts:
            driver.undefine(host.uri, str(vm.uuid))
            volumes.delete(host.uri, "corral", f"{vm.uuid}.qcow2")


@pytest.fixture
def fleet_machine():
    """For tests that make fleets of their own: skipped as ``fleet_hosts`` is."""
    reason = fleethosts.unavailable()
    if reason:
        pytest.skip(f"fleet hosts cannot run here: {reason}")


def test_fleet_hosts_come_up_in_corral_over_ssh_with_their_cpus_and_memory(fleet_cluster):
    _, hosts = fleet_cluster

    for host in hosts:
        sync.sync_host(host.pk)

    for host in hosts:
        host.refresh_from_db()
        assert host.uri.startswith(f"qemu+ssh://root@{fleethosts.NETWORK}.")
        assert (host.status, host.status_detail) == (HostStatus.UP, "")
        assert host.cpus == os.cpu_count()
        assert host.memory_mb > 0
        assert host.domain_type == "qemu"  # /dev/kvm hidden: TCG
        assert host.storage_free_bytes > 0
    assert hosts[0].uri != hosts[1].uri


def test_a_fleet_host_added_over_ssh_waits_for_its_key_to_be_trusted_and_refuses_another(
    fleet_hosts, make_cluster, admin_user, client_for
):
    fleet_host = fleet_hosts[0]
    host = Host.objects.create(
        name=unique("kvm"), cluster=make_cluster(), uri=fleet_host.managed_uri
    )
    own = sshtrust.fingerprint(fleet_host.host_key)

    sync.sync_host(host.pk)

    host.refresh_from_db()
    assert (host.status, host.status_reason) == (HostStatus.ERROR, "host_key_unknown")
    assert own in host.status_detail and host.ssh_host_key == ""
    trusted = client_for(admin_user).post(
        f"/api/hosts/{host.pk}/trust-host-key/", {"fingerprint": own}, format="json"
    )
    assert trusted.status_code == 200, trusted.content
    sync.sync_host(host.pk)
    host.refresh_from_db()
    assert (host.status, host.status_reason, host.cpus) == (HostStatus.UP, "", os.cpu_count())

    # Another key trusted for it (a reinstalled host, or another machine at its address, is
    # the same to Corral): refused, naming both, and nothing is asked of the host.
    other = sshtrust.host_key(fleet_hosts[1].host_key)
    Host.objects.filter(pk=host.pk).update(ssh_host_key=other)
    drop(host.uri)  # as the reinstalled host closed it: the next sync connects again
    sync.sync_host(host.pk)

    host.refresh_from_db()
    assert (host.status, host.status_reason) == (HostStatus.ERROR, "host_key_changed")
    assert sshtrust.fingerprint(other) in host.status_detail and own in host.status_detail
    assert host.ssh_host_key_offered == fleet_host.host_key


def test_a_vm_boots_on_a_fleet_host_and_moves_live_with_its_disk_to_the_other(
    fleet_cluster, tiny_guest, image_store, admin_user, client_for, tmp_path
):
    cluster, hosts = fleet_cluster
    for host in hosts:
        sync.sync_host(host.pk)
    admin = client_for(admin_user)
    key, public = ssh_key(tmp_path, "admin")
    added = admin.post("/api/me/sshkeys/", {"name": "laptop", "public_key": public}, format="json")
    assert added.status_code == 201, added.content
    template = tiny_guest_template(admin, tiny_guest, cluster=cluster.pk)
    made = admin.post(
        "/api/vms/",
        {"name": unique("vm"), "cluster": cluster.pk, "template": template["id"]},
        format="json",
    )
    assert made.status_code == 201, made.content
    vm_id = made.json()["id"]

    assert admin.post(f"/api/vms/{vm_id}/start/").status_code == 202
    assert JobKind.START in [job.kind for job in run_pending_jobs()]
    vm = VirtualMachine.objects.get(pk=vm_id)
    first, second = sorted(hosts, key=lambda host: host.pk != vm.host_id)
    assert driver.domain_power_state(first.uri, str(vm.uuid)) == "running"

    def console_log() -> str:
        guestinfo.refresh_host(first.pk)
        return ConsoleLog.objects.filter(vm=vm).values_list("text", flat=True).first() or ""

    wait_until(lambda: BOOTED in console_log(), timeout=120, interval=0.5, message=console_log)
    log = admin.get(f"/api/vms/{vm_id}/console-log/").content.decode()
    assert "Linux version" in log and BOOTED in log
    _screen_from_the_network(first, vm, admin_user, client_for)
    _logs_in(admin, vm, first, key)

    moved = admin.post(f"/api/vms/{vm_id}/migrate/", {"host": second.pk}, format="json")
    assert moved.status_code == 202, moved.content
    assert [job.kind for job in run_pending_jobs()] == [JobKind.MIGRATE]

    vm.refresh_from_db()
    assert vm.host_id == second.pk
    assert driver.domain_power_state(first.uri, str(vm.uuid)) is None
    conn = libvirt.open(sshtrust.connection_uri(second.uri))  # as Corral opens it
    try:
        # Moved while it ran, not booted again; and the guest itself answers there.
        domain = conn.lookupByUUIDString(str(vm.uuid))
        assert domain.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_MIGRATED]
        addresses = wait_until(lambda: agent_addresses(domain), timeout=60, message="no agent")
        assert addresses["eth0"][0] == "10.0.2.15"
    finally:
        conn.close()
    assert not {name for name in _volumes(first) if str(vm.uuid) in name}  # disk, seed, log
    _screen_from_the_network(second, vm, admin_user, client_for)  # locked there too
    _logs_in(admin, vm, second, key)

    # An image of it there, copied live off the remote host through libvirt (no host path).
    asked = admin.post(f"/api/vms/{vm_id}/image/", {"name": unique("fleet")}, format="json")
    assert asked.status_code == 202, asked.content
    assert [job.kind for job in run_pending_jobs()] == [JobKind.IMAGE_FROM_VM]
    image = Image.objects.get(pk=asked.json()["image"]["id"])
    assert (image.status, image.format) == ("ready", "qcow2")
    assert Job.objects.get(pk=asked.json()["id"]).result["live"] is True
    assert not {name for name in _volumes(second) if name.endswith("-export.qcow2")}


def _logs_in(client, vm, host: Host, key) -> None:
    """The VM's user logs in with their key where its ``ssh`` says: the port its fleet host
    publishes the guest's SSH on, at the host's own address."""
    details = wait_until(
        lambda: (
            (shown := client.get(f"/api/vms/{vm.pk}/").json())["guest_keys"]["state"] == "in_guest"
            and shown["ssh"]
        ),
        timeout=60,
        interval=0.5,
        message=lambda: client.get(f"/api/vms/{vm.pk}/").json(),
    )
    assert details["host"] == uris.host_name(host.uri)
    assert GUEST_SSH_PORTS[0] <= details["port"] <= GUEST_SSH_PORTS[1]
    logged_in = login(key, details, "hostname")
    assert (logged_in.returncode, logged_in.stdout.strip()) == (0, vm.name), logged_in.stderr


def _screen_from_the_network(host: Host, vm, user, client_for) -> None:
    """The VM's screen on its fleet host, as anyone on the host's network meets it and as its
    user opens it in Corral: the host's VNC port offers VNC authentication only (never "None")
    and refuses a guessed password; Corral's console relay signs in and hands the browser the
    screen."""

    def port() -> int | None:
        guestinfo.refresh_host(host.pk)
        return VirtualMachine.objects.get(pk=vm.pk).graphics_port

    screen = wait_until(port, timeout=30, interval=0.5, message="no VNC port read")
    address = uris.host_name(host.uri)
    assert vnc_security_types(address, screen) == {rfb.SECURITY_VNC}
    assert vnc_login(address, screen, "corral") != 0
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    width, height, name = async_to_sync(_open_screen)(_ticket(client_for(user), vm), cookie)
    assert width >= 640 and height >= 400 and name


def test_a_fleet_host_cut_off_the_network_goes_non_responsive_and_comes_back(
    fleet_hosts, fleet_cluster
):
    _, hosts = fleet_cluster
    host = hosts[1]
    sync.sync_host(host.pk)
    host.refresh_from_db()
    assert host.status == HostStatus.UP

    fleethosts.cut(fleet_hosts[1])
    try:
        # The kept connection dies by its keepalive; a new one finds no host (ssh times out).
        result = sync.sync_host(host.pk)
        host.refresh_from_db()
        assert (result.host_status, host.status) == (HostStatus.NON_RESPONSIVE,) * 2
        assert host.status_detail
    finally:
        fleethosts.rejoin(fleet_hosts[1])

    sync.sync_host(host.pk)
    host.refresh_from_db()
    assert host.status == HostStatus.UP


def test_hosts_of_a_fleet_with_shared_storage_share_one_pool(fleet_machine, tmp_path):
    fleet = fleethosts.up(2, True, directory=tmp_path / "shared", owner=os.getpid())
    try:
        one, other = fleet.hosts
        conn = libvirt.open(one.uri)
        try:
            pool = conn.storagePoolLookupByName("corral")
            pool.createXML(
                "<volume><name>seen-by-both.qcow2</name><capacity>1048576</capacity>"
                "<target><format type='qcow2'/></target></volume>",
                0,
            )
        finally:
            conn.close()

        assert "seen-by-both.qcow2" in _volumes(Host(uri=other.uri))
        assert one.pool_path == other.pool_path == fleethosts.SHARED_POOL_PATH
    finally:
        fleethosts.down(tmp_path / "shared")


def test_two_fleets_at_once_hold_their_own_names_and_addresses_and_a_dead_runs_is_removed(
    fleet_machine, tmp_path
):
    """Two test runs side by side each have a fleet of their own; a run that died leaves its
    fleet behind, and the next fleet to start takes it down."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    ours = fleethosts.up(1, directory=tmp_path / "ours", owner=os.getpid())
    try:
        dead = fleethosts.up(1, directory=tmp_path / "dead", owner=gone.pid)
        (mine,), (theirs,) = ours.hosts, dead.hosts
        assert ours.bridge != dead.bridge and mine.address != theirs.address
        assert mine.namespace != theirs.namespace
        assert driver.host_report(theirs.uri).cpus == os.cpu_count()

        assert dead.slot in fleethosts.remove_leftovers()

        assert theirs.pids() == [] and not (tmp_path / "dead").exists()
        assert theirs.namespace not in fleethosts.namespaces()
        assert mine.running()
        assert driver.host_report(mine.uri).cpus == os.cpu_count()
    finally:
        fleethosts.down(tmp_path / "ours")
        fleethosts.down(tmp_path / "dead")


def test_fleethosts_command_starts_registers_lists_and_takes_down_hosts(
    fleet_machine, settings, tmp_path
):
    settings.CORRAL_SIMHOSTS_DIR = tmp_path / "simhosts"
    try:
        call_command("fleethosts", "up", "1", stdout=StringIO())
        call_command("fleethosts", "up", "1", stdout=StringIO())  # idempotent

        host = Host.objects.get(cluster__name="fleet")
        assert (host.name, host.status) == ("fleet-1", HostStatus.UP)
        assert host.uri.startswith("qemu+ssh://root@")
        listed = StringIO()
        call_command("fleethosts", "list", stdout=listed)
        assert listed.getvalue() == f"fleet-1: running  {host.uri}\n"
        (fleet_host,) = fleethosts.discover().hosts
        call_command("fleethosts", "cut", "fleet-1", stdout=StringIO())
        listed = StringIO()
        call_command("fleethosts", "list", stdout=listed)
        assert listed.getvalue() == f"fleet-1: running, cut off  {host.uri}\n"
        call_command("fleethosts", "rejoin", "fleet-1", stdout=StringIO())
        assert not fleet_host.cut_off()
    finally:
        gone = StringIO()
        call_command("fleethosts", "down", stdout=gone)

    assert gone.getvalue() == "fleet-1: taken down\n"
    assert fleet_host.pids() == [] and fleet_host.namespace not in fleethosts.namespaces()
    listed = StringIO()
    call_command("fleethosts", "list", stdout=listed)
    assert listed.getvalue() == ""


def test_a_start_a_fleet_host_fails_is_that_hosts_failure_and_runs_on_the_other(
    fleet_hosts, fleet_cluster, make_template, make_vm, admin_user
):
    """Not a lost host: libvirt's reason reaches the job, the start goes on to the other host,
    and both hosts stay Up. The first host fails the VM by a folder where QEMU writes its
    serial log (its guest, a blank disk, runs its firmware only)."""
    cluster, hosts = fleet_cluster
    for host in hosts:
        sync.sync_host(host.pk)
    template = make_template(vcpus=1, memory_mb=128, disk_gb=1, graphics="none")
    vm = make_vm(cluster=cluster, template=template)
    with decision(cluster.pk):
        first, second = place(vm, purpose="start").hosts
    fleet_host = fleet_hosts[[host.pk for host in hosts].index(first.pk)]
    pool = fleet_host.directory / "varlib" / fleethosts.POOL_PATH.removeprefix("/var/lib/libvirt/")
    (pool / f"{vm.uuid}.log" / "in-the-way").mkdir(parents=True)
    try:
        job = jobs.submit(JobKind.START, vm=vm, requested_by=admin_user)
        jobs.run(job.pk, OPERATION_BY_KIND)
        job = Job.objects.get(pk=job.pk)

        assert job.state == "succeeded", job.error_message
        assert [(a["host"], a["outcome"]) for a in job.result["attempts"]] == [
            (first.name, "failed"),
            (second.name, "succeeded"),
        ]
        assert job.result["attempts"][0]["code"] == "driver_error"
        failed = job.journal.get(message__startswith=f"Starting on {first.name} failed")
        assert "Is a directory" in failed.detail  # libvirt's words, from the remote host
        for host in hosts:
            sync.sync_host(host.pk)
        assert sorted(
            Host.objects.filter(pk__in=[first.pk, second.pk]).values_list("status", "status_reason")
        ) == [(HostStatus.UP, ""), (HostStatus.UP, "")]
    finally:
        shutil.rmtree(pool / f"{vm.uuid}.log", ignore_errors=True)


def test_a_vm_on_fleet_hosts_sharing_storage_moves_on_its_own_disk_and_boots_from_it_again(
    fleet_machine, tmp_path, tiny_guest, image_store, make_cluster, admin_user, client_for
):
    """Two remote hosts whose pools are one folder (as an NFS export would be): the VM moves
    with its memory only, its disk the same file, and boots from it again on the other."""
    fleet = fleethosts.up(2, True, directory=tmp_path / "shared", owner=os.getpid())
    folder = tmp_path / "shared" / "shared"
    cluster = make_cluster()
    hosts = []
    try:
        for fleet_host in fleet.hosts:
            host = Host.objects.create(
                name=unique(fleet_host.name),
                cluster=cluster,
                uri=fleet_host.managed_uri,
                ssh_host_key=fleet_host.host_key,
                storage_path=fleet_host.pool_path,
                shared_storage="fleet-export",
            )
            sync.sync_host(host.pk)
            hosts.append(host)
        admin = client_for(admin_user)
        template = tiny_guest_template(admin, tiny_guest, cluster=cluster.pk, graphics="none")
        made = admin.post(
            "/api/vms/",
            {"name": unique("vm"), "cluster": cluster.pk, "template": template["id"]},
            format="json",
        )
        vm = VirtualMachine.objects.get(pk=made.json()["id"])
        assert admin.post(f"/api/vms/{vm.pk}/start/").status_code == 202
        run_pending_jobs()
        vm.refresh_from_db()
        first, second = sorted(hosts, key=lambda host: host.pk != vm.host_id)
        disk = folder / f"{vm.uuid}.qcow2"
        the_disk = (disk.stat().st_dev, disk.stat().st_ino)

        moved = admin.post(f"/api/vms/{vm.pk}/migrate/", {"host": second.pk}, format="json")
        assert moved.status_code == 202, moved.content
        (job,) = run_pending_jobs()

        vm.refresh_from_db()
        assert (job.kind, vm.host_id) == (JobKind.MIGRATE, second.pk)
        assert driver.domain_power_state(second.uri, str(vm.uuid)) == "running"
        assert (disk.stat().st_dev, disk.stat().st_ino) == the_disk  # never made again
        journal = "\n".join(job.journal.values_list("message", flat=True))
        assert "Recreating" not in journal and "Copying image" not in journal

        assert admin.post(f"/api/vms/{vm.pk}/poweroff/").status_code == 202
        run_pending_jobs()
        assert admin.post(f"/api/vms/{vm.pk}/start/").status_code == 202
        run_pending_jobs()
        vm.refresh_from_db()
        console = folder / f"{vm.uuid}.log"
        assert vm.status == "up" and (disk.stat().st_dev, disk.stat().st_ino) == the_disk
        assert "corral-guest: boot 1" in console.read_text(errors="replace")
        # It counts its boots on its disk: a second one shows it booted from the same disk.
        wait_until(
            lambda: "corral-guest: boot 2" in console.read_text(errors="replace"),
            timeout=120,
            interval=0.5,
            message="the guest did not boot again from its disk",
        )
    finally:
        for host in hosts:
            drop(host.uri)
        fleethosts.down(tmp_path / "shared")
