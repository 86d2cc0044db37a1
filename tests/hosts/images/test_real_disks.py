"""Real VMs on real QEMU hosts (session daemons): images uploaded through the API reach the
host's storage pool once, each VM boots from its own qcow2 overlay over the base image, a
stateless return recreates the overlay, a stopped VM started on another host takes its disk
along (a stateless one no user holds gets a new overlay there), and deleting the VM deletes it."""

import threading
from xml.etree import ElementTree

import libvirt
import pytest
from django.db import close_old_connections

from hosts import driver, jobs, sync
from hosts.driver.libvirt import guests, volumes
from hosts.guests import guestinfo
from hosts.models import (
    ConsoleLog,
    CopyState,
    Host,
    ImageCopy,
    Job,
    JobJournal,
    JobKind,
    JobState,
    Template,
    VirtualMachine,
)
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import unique, wait_until
from tests.hosts.images.uploads import upload_file

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1024**3
BOOTED = "corral-guest: booted"


@pytest.fixture
def qemu_cluster(qemu_host):
    """The cluster of the first QEMU host (``qemu_host``), alone in it."""
    return qemu_host.cluster


@pytest.fixture
def tiny_template(qemu_cluster, tiny_guest, admin_user, client_for, image_store):
    """A template booting the tiny guest: its kernel, initrd and disk uploaded through the API."""
    client = client_for(admin_user)
    response = client.post(
        "/api/templates/",
        {
            "name": unique("tiny"),
            "vcpus": 1,
            "memory_mb": 128,
            "disk_gb": 1,
            "kernel_image": upload_file(client, tiny_guest.kernel, "kernel")["id"],
            "initrd_image": upload_file(client, tiny_guest.initrd, "initrd")["id"],
            "disk_image": upload_file(client, tiny_guest.disk, "disk")["id"],
            "kernel_cmdline": "console=ttyS0 quiet",
            "graphics": "none",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _run(kind, vm):
    job = jobs.submit(kind, vm=vm)
    jobs.run(job.pk, OPERATION_BY_KIND)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, (job.error_code, job.error_message)
    return job


def _domain_xml(host: Host, vm) -> str:
    conn = libvirt.open(host.uri)
    try:
        return conn.lookupByUUIDString(str(vm.uuid)).XMLDesc(0)
    finally:
        conn.close()


def _volume(host: Host, name: str):
    conn = libvirt.open(host.uri)
    try:
        pool = conn.storagePoolLookupByName("corral")
        pool.refresh(0)
        try:
            volume = pool.storageVolLookupByName(name)
        except libvirt.libvirtError:
            return None
        xml = ElementTree.fromstring(volume.XMLDesc(0))
        return {
            "capacity": volume.info()[1],
            "allocation": volume.info()[2],
            "backing": xml.findtext("backingStore/path"),
        }
    finally:
        conn.close()


def _inactive_xml(host: Host, vm) -> str:
    conn = libvirt.open(host.uri)
    try:
        dom = conn.lookupByUUIDString(str(vm.uuid))
        return dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    finally:
        conn.close()


def _files_named(xml: str) -> list[str]:
    root = ElementTree.fromstring(xml)
    named = [root.findtext("os/kernel"), root.findtext("os/initrd")]
    named += [source.get("file") for source in root.iterfind("devices/disk/source")]
    named += [log.get("file") for log in root.iterfind("devices/serial/log")]
    return [path for path in named if path]


def _pool_dir(host: Host) -> str:
    conn = libvirt.open(host.uri)
    try:
        pool = conn.storagePoolLookupByName("corral")
        return ElementTree.fromstring(pool.XMLDesc(0)).findtext("target/path")
    finally:
        conn.close()


def _vm_volumes(host: Host, vm) -> set[str]:
    conn = libvirt.open(host.uri)
    try:
        pool = conn.storagePoolLookupByName("corral")
        pool.refresh(0)
        return {name for name in pool.listVolumes() if name.startswith(str(vm.uuid))}
    finally:
        conn.close()


def test_a_vm_boots_from_its_own_overlay_which_a_revert_recreates_and_delete_removes(
    qemu_cluster, tiny_template, make_vm
):
    vm = make_vm(cluster=qemu_cluster, template_id=tiny_template, vcpus=1, memory_mb=128, disk_gb=1)
    vm.refresh_from_db()
    host = Host.objects.get(cluster=qemu_cluster)
    base = ImageCopy.objects.filter(host=host, image=vm.template.disk_image)

    _run(JobKind.START, vm)

    vm.refresh_from_db()
    assert (vm.host_id, driver.domain_power_state(host.uri, str(vm.uuid))) == (host.pk, "running")
    assert base.get().state == CopyState.READY
    host.refresh_from_db()
    assert 0 < host.storage_free_bytes <= host.storage_capacity_bytes
    domain = ElementTree.fromstring(_domain_xml(host, vm))
    assert domain.get("type") == host.domain_type != ""
    assert domain.findtext("devices/emulator") == host.emulator != ""
    assert domain.find("devices/interface").get("type") == "user"  # no libvirt networks here
    disk = _volume(host, f"{vm.uuid}.qcow2")
    assert disk["capacity"] == GIB
    assert disk["backing"] == base.get().path
    # The guest formats its blank disk on first boot: the overlay takes the writes.
    wait_until(
        lambda: _volume(host, f"{vm.uuid}.qcow2")["allocation"] > 1024 * 1024,
        timeout=90,
        message="The guest never wrote to its disk.",
    )

    _run(JobKind.POWEROFF, vm)
    _run(JobKind.REVERT, vm)

    assert _volume(host, f"{vm.uuid}.qcow2")["allocation"] < 1024 * 1024

    _run(JobKind.DELETE, vm)

    assert _volume(host, f"{vm.uuid}.qcow2") is None
    assert driver.domain_power_state(host.uri, str(vm.uuid)) is None
    assert _volume(host, base.get().image.volume_name) is not None  # the base stays


def test_two_vms_needing_an_image_at_once_share_one_copy(qemu_cluster, tiny_template, make_vm):
    vms = [
        make_vm(cluster=qemu_cluster, template_id=tiny_template, vcpus=1, memory_mb=128, disk_gb=1)
        for _ in range(2)
    ]
    submitted = [jobs.submit(JobKind.START, vm=vm) for vm in vms]
    barrier = threading.Barrier(2)

    def run(job_id):
        barrier.wait()
        try:
            jobs.run(job_id, OPERATION_BY_KIND)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=run, args=(job.pk,)) for job in submitted]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    for job in submitted:
        job.refresh_from_db()
        assert job.state == JobState.SUCCEEDED, (job.error_code, job.error_message)
    copies = JobJournal.objects.filter(job__in=submitted, message__startswith="Copying image")
    template_images = 3  # kernel, initrd, disk
    assert copies.count() == template_images
    assert ImageCopy.objects.filter(state=CopyState.READY).count() == template_images


def test_a_host_without_the_storage_pool_fails_the_start_clearly_and_makes_no_disk(
    qemu_cluster, tiny_template, make_vm
):
    host = Host.objects.get(cluster=qemu_cluster)
    Host.objects.filter(pk=host.pk).update(storage_pool="nowhere")
    vm = make_vm(cluster=qemu_cluster, template_id=tiny_template, vcpus=1, memory_mb=128, disk_gb=1)

    job = jobs.submit(JobKind.START, vm=vm)
    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    assert (job.state, job.error_code) == (JobState.FAILED, "no_storage_pool")
    assert "has no storage pool 'nowhere'" in job.error_message
    assert _volume(host, f"{vm.uuid}.qcow2") is None
    vm.refresh_from_db()
    assert vm.status == "down"


def test_a_running_vm_migrates_with_its_disk_to_a_host_with_its_own_pool(
    qemu_cluster, qemu_daemons, tiny_template, make_vm
):
    first = Host.objects.get(cluster=qemu_cluster)
    second = Host.objects.create(name=unique("qemu"), cluster=qemu_cluster, uri=qemu_daemons[1].uri)
    sync.sync_host(second.pk)
    vm = make_vm(
        cluster=qemu_cluster,
        template_id=tiny_template,
        vcpus=1,
        memory_mb=128,
        disk_gb=1,
        pinned_host=first,
    )
    _run(JobKind.START, vm)
    VirtualMachine.objects.filter(pk=vm.pk).update(pinned_host=None)
    assert "corral-guest: boot 1" in _boots(first, vm, 1)
    wait_until(
        lambda: (
            guestinfo.refresh_host(first.pk) >= 0
            and ConsoleLog.objects.filter(vm=vm, size__gt=0).exists()
        ),
        timeout=60,
        message="No console log read from the source.",
    )
    printed = ConsoleLog.objects.get(vm=vm).text

    job = jobs.submit(JobKind.MIGRATE, vm=vm, params={"host": second.pk})
    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, (job.error_code, job.error_message)
    vm.refresh_from_db()
    assert vm.host_id == second.pk
    assert driver.domain_power_state(second.uri, str(vm.uuid)) == "running"
    assert driver.domain_power_state(first.uri, str(vm.uuid)) is None
    assert _volume(first, f"{vm.uuid}.qcow2") is None
    moved = _volume(second, f"{vm.uuid}.qcow2")
    base = ImageCopy.objects.get(host=second, image=vm.template.disk_image)
    assert moved["backing"] == base.path
    # Every file the running domain names (disk, kernel, initrd, seed, serial log) is in the
    # destination's pool, and the source's pool keeps nothing of the VM.
    for xml in (_domain_xml(second, vm), _inactive_xml(second, vm)):
        named = _files_named(xml)
        assert {path.rsplit("/", 1)[-1] for path in named} >= {
            f"{vm.uuid}.qcow2",
            f"{vm.uuid}-seed.iso",
            f"{vm.uuid}.log",
        }
        assert all(path.startswith(_pool_dir(second) + "/") for path in named), named
    assert _vm_volumes(first, vm) == set()
    # The log goes on in the destination's pool, after what the guest printed before.
    on_second = guests.read_volume(second.uri, f"{vm.uuid}.log")
    assert on_second.decode(errors="replace").replace("\0", "").startswith(printed)
    ConsoleLog.objects.filter(vm=vm).delete()
    guestinfo.refresh_host(second.pk)
    assert ConsoleLog.objects.get(vm=vm).text.startswith(printed)
    try:
        # Stopped and started again there, the guest boots from the disk that came along:
        # the boots it counts on it go on.
        _run(JobKind.POWEROFF, vm)
        VirtualMachine.objects.filter(pk=vm.pk).update(pinned_host=second)
        _run(JobKind.START, vm)
        text = _boots(second, vm, 2)
        assert text.index("corral-guest: boot 1") < text.index("corral-guest: boot 2")
        _run(JobKind.POWEROFF, vm)
        _run(JobKind.DELETE, vm)
    finally:
        driver.undefine(second.uri, str(vm.uuid))
        volumes.delete(second.uri, "corral", f"{vm.uuid}.qcow2")


def _console(host: Host, vm) -> str:
    """The VM's serial log as it is in ``host``'s pool ('' when there is none)."""
    text = guests.read_volume(host.uri, f"{vm.uuid}.log") or b""
    return text.decode(errors="replace").replace("\0", "")


def _boots(host: Host, vm, count: int, timeout: float = 60) -> str:
    """Wait until the guest on ``host`` has booted (``count`` boots on its log); the log."""
    return wait_until(
        lambda: (text := _console(host, vm)).count(BOOTED) >= count and text,
        timeout=timeout,
        message=lambda: f"The guest never booted on {host.name}: {_console(host, vm)[-2000:]!r}",
    )


@pytest.mark.parametrize(
    "stateless, held, boots_from_base",
    [(False, False, False), (True, False, True), (True, True, False)],
    ids=["persistent", "stateless-free", "stateless-held"],
)
def test_a_stopped_vm_started_on_another_host_takes_its_disk_or_a_free_stateless_one_its_base(
    qemu_cluster,
    qemu_daemons,
    tiny_template,
    make_vm,
    make_pool,
    make_user,
    stateless,
    held,
    boots_from_base,
):
    first = Host.objects.get(cluster=qemu_cluster)
    second = Host.objects.create(name=unique("qemu"), cluster=qemu_cluster, uri=qemu_daemons[1].uri)
    sync.sync_host(second.pk)
    template = Template.objects.get(pk=tiny_template)
    # A manual pool: stopping a VM returns (and reverts) nothing; its user keeps it.
    pool = make_pool(cluster=qemu_cluster, template=template, type="manual", stateless=stateless)
    vm = make_vm(
        cluster=qemu_cluster,
        template=template,
        pool=pool,
        owner=make_user(unique("user")) if held else None,
        vcpus=1,
        memory_mb=128,
        disk_gb=1,
        pinned_host=first,
    )
    _run(JobKind.START, vm)
    # The guest counts its boots on its disk (synced before it says so): "boot 1" here.
    assert "corral-guest: boot 1" in _boots(first, vm, 1)
    _run(JobKind.POWEROFF, vm)
    VirtualMachine.objects.filter(pk=vm.pk).update(pinned_host=second)

    try:
        _run(JobKind.START, vm)

        vm.refresh_from_db()
        assert vm.host_id == second.pk
        assert driver.domain_power_state(second.uri, str(vm.uuid)) == "running"
        assert driver.domain_power_state(first.uri, str(vm.uuid)) is None
        assert _vm_volumes(first, vm) == set()
        disk = _volume(second, f"{vm.uuid}.qcow2")
        assert disk["capacity"] == GIB
        assert disk["backing"] == ImageCopy.objects.get(host=second, image=template.disk_image).path
        assert all(
            path.startswith(_pool_dir(second) + "/")
            for path in _files_named(_domain_xml(second, vm))
        )
        if boots_from_base:
            # A new overlay over the base: the guest formats a blank disk and counts from 1.
            text = _boots(second, vm, 1)
            assert "corral-guest: boot 1" in text
            assert "corral-guest: boot 2" not in text
        else:
            # The overlay came along: the guest finds its disk and counts on (the log too).
            assert disk["allocation"] > 1024 * 1024  # what the guest wrote on the first host
            text = _boots(second, vm, 2)
            assert text.index("corral-guest: boot 1") < text.index("corral-guest: boot 2")
        _run(JobKind.POWEROFF, vm)
        _run(JobKind.DELETE, vm)
        assert _vm_volumes(second, vm) == set()
    finally:
        driver.undefine(second.uri, str(vm.uuid))
        volumes.delete(second.uri, "corral", f"{vm.uuid}.qcow2")


def test_a_new_pool_copies_its_images_to_the_clusters_real_hosts_ahead_of_need(
    qemu_cluster, tiny_template, admin_user, client_for
):
    host = Host.objects.get(cluster=qemu_cluster)

    response = client_for(admin_user).post(
        "/api/vmpools/",
        {"name": unique("pool"), "cluster": qemu_cluster.pk, "template": tiny_template, "size": 1},
        format="json",
    )

    assert response.status_code == 201, response.content
    copies = Job.objects.filter(kind=JobKind.COPY_IMAGE, host=host)
    assert copies.count() == 3
    for job in copies:
        jobs.run(job.pk, OPERATION_BY_KIND)
    assert ImageCopy.objects.filter(host=host, state=CopyState.READY).count() == 3


def test_an_image_gone_from_a_host_is_copied_again_when_needed(qemu_cluster, tiny_template):
    host = Host.objects.get(cluster=qemu_cluster)
    image = Template.objects.get(pk=tiny_template).kernel_image
    first = jobs.submit(JobKind.COPY_IMAGE, host=host, params={"image": image.pk})
    jobs.run(first.pk, OPERATION_BY_KIND)
    volumes.delete(host.uri, "corral", image.volume_name)

    again = jobs.submit(JobKind.COPY_IMAGE, host=host, params={"image": image.pk})
    jobs.run(again.pk, OPERATION_BY_KIND)

    again.refresh_from_db()
    assert again.state == JobState.SUCCEEDED, again.error_message
    assert _volume(host, image.volume_name) is not None
    assert ImageCopy.objects.get(host=host, image=image).state == CopyState.READY
