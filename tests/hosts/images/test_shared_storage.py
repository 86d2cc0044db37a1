"""Hosts whose storage pools are one folder (shared storage, as two hosts mounting one NFS
export): a running VM migrates between them and a stopped one moves without its disk being
made, replaced or deleted, and boots from it again; the images are copied there once. Whether
hosts share storage is what they are set to, checked against what their pools show: the sync
reports a host that does not share as set, and a VM never moves between two such hosts.

The unshared case (the disk copied along) is
``test_real_disks.py::test_a_running_vm_migrates_with_its_disk_to_a_host_with_its_own_pool``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from hosts import driver, jobs, sync
from hosts.driver.libvirt import volumes
from hosts.models import CopyState, Host, ImageCopy, Job, JobKind, JobState, Template
from hosts.models import VirtualMachine as VM
from hosts.operations import OPERATION_BY_KIND
from project.models import Event
from tests.conftest import unique
from tests.hosts.images.test_real_disks import _boots as boots
from tests.hosts.images.uploads import tiny_guest_template

pytestmark = pytest.mark.django_db(transaction=True)
SHARED = "lab-shared"


@pytest.fixture
def tiny_template(tiny_guest, admin_user, client_for, image_store) -> Template:
    """A template booting the tiny guest: its kernel, initrd and disk uploaded through the API."""
    made = tiny_guest_template(
        client_for(admin_user),
        tiny_guest,
        vcpus=1,
        kernel_cmdline="console=ttyS0 quiet",
        graphics="none",
        guest_agent=False,
        login_user="",
    )
    return Template.objects.get(pk=made["id"])


def _host(cluster, daemon, **fields) -> Host:
    """A Host row for the lab host ``daemon``, synced once."""
    host = Host.objects.create(name=unique("qemu"), cluster=cluster, uri=daemon.uri, **fields)
    sync.sync_host(host.pk)
    host.refresh_from_db()
    return host


def _job(kind, vm, **params) -> Job:
    job = jobs.submit(kind, vm=vm, params=params)
    jobs.run(job.pk, OPERATION_BY_KIND)
    job.refresh_from_db()
    return job


def _succeeds(kind, vm, **params) -> Job:
    job = _job(kind, vm, **params)
    assert job.state == JobState.SUCCEEDED, (job.error_code, job.error_message)
    return job


def _pin(vm, host: Host | None) -> None:
    VM.objects.filter(pk=vm.pk).update(pinned_host=host)


def _journal(job: Job) -> str:
    return "\n".join(job.journal.values_list("message", flat=True))


def _boots(host: Host, vm, count: int) -> str:
    return boots(host, vm, count, timeout=90)


def _identity(path: Path) -> tuple[int, int]:
    """The file's device and inode: the same file, never made again."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino


def _forget(vm, *hosts: Host) -> None:
    for host in hosts:
        driver.undefine(host.uri, str(vm.uuid))
    volumes.delete(hosts[0].uri, "corral", f"{vm.uuid}.qcow2")


def test_a_vm_moves_between_hosts_sharing_storage_on_its_own_disk_and_boots_from_it_again(
    shared_storage_daemons, make_cluster, make_vm, tiny_template
):
    cluster = make_cluster()
    first, second = (_host(cluster, d, shared_storage=SHARED) for d in shared_storage_daemons)
    assert (first.storage_problem, second.storage_problem) == ("", "")
    folder = shared_storage_daemons[0].pool_directory
    vm = make_vm(cluster, tiny_template, vcpus=1, memory_mb=128, disk_gb=1, pinned_host=first)
    uuid = str(vm.uuid)
    disk = folder / f"{uuid}.qcow2"
    try:
        _succeeds(JobKind.START, vm)
        assert "corral-guest: boot 1" in _boots(first, vm, 1)
        the_disk, the_seed = _identity(disk), _identity(folder / f"{uuid}-seed.iso")
        _pin(vm, None)

        # The second host's own name for itself leads nowhere from the first: without its
        # migration address the move fails, and the VM runs on where it was, on its disk.
        refused = _job(JobKind.MIGRATE, vm, host=second.pk)

        assert refused.state == JobState.FAILED
        assert "127.0.0.2" in " ".join(refused.journal.values_list("detail", flat=True))
        assert driver.domain_power_state(first.uri, uuid) == "running"
        assert driver.domain_power_state(second.uri, uuid) is None
        assert _identity(disk) == the_disk

        Host.objects.filter(pk=second.pk).update(migration_address="127.0.0.3")
        moved = _succeeds(JobKind.MIGRATE, vm, host=second.pk)

        vm.refresh_from_db()
        assert vm.host_id == second.pk
        assert driver.domain_power_state(second.uri, uuid) == "running"
        assert driver.domain_power_state(first.uri, uuid) is None
        # Only the memory moved: the disk and the seed are the files they were, and nothing
        # was copied to the second host, which found the images where the first put them.
        assert (_identity(disk), _identity(folder / f"{uuid}-seed.iso")) == (the_disk, the_seed)
        journal = _journal(moved)
        assert f"share storage {SHARED}: the VM's disk stays where it is" in journal
        assert "Copying image" not in journal and "Recreating" not in journal
        images = [tiny_template.kernel_image, tiny_template.initrd_image, tiny_template.disk_image]
        for image in images:
            copies = ImageCopy.objects.filter(image=image, host__in=[first, second])
            assert set(copies.values_list("state", flat=True)) == {CopyState.READY}
            assert copies.count() == 2
            assert (folder / image.volume_name).is_file()

        # Stopped and started again there, the guest boots from its own disk: the boots it
        # counts on it go on.
        _succeeds(JobKind.POWEROFF, vm)
        _pin(vm, second)
        _succeeds(JobKind.START, vm)

        text = _boots(second, vm, 2)
        assert text.index("corral-guest: boot 1") < text.index("corral-guest: boot 2")
        assert _identity(disk) == the_disk

        # A stopped VM started on the other host: only its definition moves.
        _succeeds(JobKind.POWEROFF, vm)
        _pin(vm, first)
        _succeeds(JobKind.START, vm)

        vm.refresh_from_db()
        assert vm.host_id == first.pk
        assert driver.domain_power_state(second.uri, uuid) is None
        assert "corral-guest: boot 3" in _boots(first, vm, 3)
        assert _identity(disk) == the_disk

        _succeeds(JobKind.POWEROFF, vm)
        _succeeds(JobKind.DELETE, vm)

        assert not disk.exists()
        assert (folder / tiny_template.disk_image.volume_name).is_file()  # the base stays
    finally:
        _forget(vm, first, second)


def _refused_move(vm, source: Host, destination: Host, folder: Path) -> Job:
    """The VM prepared (its disk made) on ``source``, then started pinned to ``destination``:
    the start job, its disk on ``source`` the same file before and after."""
    _pin(vm, source)
    _succeeds(JobKind.PREPARE, vm)
    disk = folder / f"{vm.uuid}.qcow2"
    before = _identity(disk)
    _pin(vm, destination)

    job = _job(JobKind.START, vm)

    assert _identity(disk) == before
    assert driver.domain_power_state(source.uri, str(vm.uuid)) == "shutoff"
    assert driver.domain_power_state(destination.uri, str(vm.uuid)) is None
    return job


def test_a_vm_never_moves_between_hosts_set_to_share_storage_that_do_not(
    qemu_daemons, make_cluster, make_vm, tiny_template
):
    cluster = make_cluster()
    first, second = (_host(cluster, d, shared_storage="nfs-apart") for d in qemu_daemons)
    vm = make_vm(cluster, tiny_template, vcpus=1, memory_mb=128, disk_gb=1)
    try:
        job = _refused_move(vm, first, second, qemu_daemons[0].pool_directory)

        assert (job.state, job.error_code) == (JobState.FAILED, "storage_not_shared")
        assert f"are set to share storage nfs-apart, but {second.name}'s" in job.error_message
        assert not Path(qemu_daemons[1].pool_directory, f"{vm.uuid}.qcow2").exists()
    finally:
        _forget(vm, first, second)


def test_a_vm_never_moves_between_hosts_sharing_storage_they_are_not_set_to_share(
    shared_storage_daemons, make_cluster, make_vm, tiny_template
):
    cluster = make_cluster()
    first, second = (_host(cluster, d) for d in shared_storage_daemons)
    vm = make_vm(cluster, tiny_template, vcpus=1, memory_mb=128, disk_gb=1)
    try:
        job = _refused_move(vm, first, second, shared_storage_daemons[0].pool_directory)

        assert (job.state, job.error_code) == (JobState.FAILED, "storage_shared_unset")
        assert "copying the VM's disk there would replace the disk itself" in job.error_message
    finally:
        _forget(vm, first, second)


def _alerts(host: Host) -> list[str]:
    return list(
        Event.objects.filter(kind="alert", object_type="host", object_id=host.pk).values_list(
            "message", flat=True
        )
    )


def _check_again(time_machine, *hosts: Host) -> list[Host]:
    """Sync the hosts once the check interval has passed, one second apart; the hosts as
    stored."""
    time_machine.shift(timedelta(seconds=300))
    for host in hosts:
        time_machine.shift(timedelta(seconds=1))
        sync.sync_host(host.pk)
    return [Host.objects.get(pk=host.pk) for host in hosts]


def test_the_sync_reports_hosts_set_to_share_storage_whose_pools_are_apart(
    qemu_daemons, make_cluster, time_machine
):
    time_machine.move_to(timezone.now(), tick=False)
    cluster = make_cluster()
    first, second = (_host(cluster, d, shared_storage="nfs-apart") for d in qemu_daemons)

    first, second = _check_again(time_machine, first, second)

    for host, other in ((first, second), (second, first)):
        assert host.storage_problem == (
            f"It is set to share storage nfs-apart with {other.name}, but its storage pool "
            "corral is not its pool's folder."
        )
        assert _alerts(host) == [
            f"Host {host.name} does not share storage as set: {host.storage_problem}"
        ]
        assert host.status == "up"


def test_the_sync_reports_hosts_sharing_a_pool_folder_unset_until_they_are_set_to(
    shared_storage_daemons, make_cluster, admin_user, client_for, time_machine
):
    time_machine.move_to(timezone.now(), tick=False)
    cluster = make_cluster()
    first, second = (_host(cluster, d) for d in shared_storage_daemons)

    first, second = _check_again(time_machine, first, second)

    for host, other in ((first, second), (second, first)):
        assert host.storage_problem == (
            f"Its storage pool corral is also the pool of {other.name} (no shared storage), "
            "which is not set to share storage with it."
        )
        assert len(_alerts(host)) == 1

    client = client_for(admin_user)
    for host in (first, second):
        response = client.patch(f"/api/hosts/{host.pk}/", {"shared_storage": SHARED}, format="json")
        assert response.status_code == 200, response.json()
    for host in (first, second):  # checked at their next sync: their settings changed
        time_machine.shift(timedelta(seconds=1))
        sync.sync_host(host.pk)

    for host in (first, second):
        shown = client.get(f"/api/hosts/{host.pk}/").json()
        assert (shown["shared_storage"], shown["storage_problem"]) == (SHARED, "")
        assert Event.objects.filter(
            object_type="host", object_id=host.pk, message=f"Host {host.name} shares storage as set"
        ).exists()
    assert os.path.isdir(shared_storage_daemons[0].pool_directory)
