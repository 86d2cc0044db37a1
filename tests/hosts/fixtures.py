"""Fixtures for VM operations: a cluster of the simulated hosts, VMs on it, jobs and hooks.

Loaded for the whole suite (tests/conftest.py): the pool, lease, admin, browser and
reliability tests use them too."""

import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from django.db import connection

from hosts import driver, jobs, sync
from hosts.models import Host, Job, JobState, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from lab import simhosts
from lab.lightsim import driver as lightsim
from project.access.permissions import permission_for
from project.access.roles import ensure_grant_permissions
from tests.conftest import unique


@pytest.fixture
def sim_cluster(db, sim_daemons, make_cluster):
    """A cluster of the three simulated hosts, synced once (Up, capacity read).

    The domains of every VM in the database are removed from the daemons afterwards, so the
    next test finds the hosts as this one found them.
    """
    cluster = make_cluster()
    for daemon in sim_daemons:
        host = Host.objects.create(name=daemon.name, cluster=cluster, uri=daemon.uri)
        sync.sync_host(host.pk)
    yield cluster
    remove_domains(sim_daemons, VirtualMachine.objects.values_list("uuid", flat=True))


def remove_domains(daemons, uuids) -> None:
    """Undefine the domains with these UUIDs from every running daemon that has them."""
    wanted = {str(uuid) for uuid in uuids}
    for daemon in daemons:
        if daemon.pid() is None:
            continue
        for domain in driver.host_report(daemon.uri).domains:
            if domain.uuid in wanted:
                driver.undefine(daemon.uri, domain.uuid)


@pytest.fixture
def sim_hosts(sim_cluster):
    """The hosts of ``sim_cluster``, in the order of the daemons (sim-1, sim-2, sim-3)."""
    return list(Host.objects.filter(cluster=sim_cluster).order_by("name"))


@pytest.fixture
def small_template(make_template):
    """128 MiB, so many VMs fit on a simulated host (3072 MiB)."""
    return make_template(memory_mb=128, vcpus=1, disk_gb=1)


@pytest.fixture
def sim_vm(make_vm, sim_cluster, small_template):
    """sim_vm(**fields) -> a VM (Down unless told) in the simulated cluster."""

    def make(**fields) -> VirtualMachine:
        return make_vm(cluster=sim_cluster, template=small_template, **fields)

    return make


@pytest.fixture
def running_vm(sim_vm):
    """running_vm() -> a VM started by a real start job (committed: needs transactional_db)."""

    def make(**fields) -> VirtualMachine:
        vm = sim_vm(**fields)
        job = jobs.submit("start", vm=vm)
        assert jobs.run(job.pk, OPERATION_BY_KIND) == "succeeded", Job.objects.get(
            pk=job.pk
        ).error_message
        vm.refresh_from_db()
        return vm

    return make


@pytest.fixture
def make_role(db):
    """make_role("Name", ["hosts.view_virtualmachine", ...]) -> a custom role, ready to grant."""

    def make(name: str, actions: list[str]):
        from project.models import Role

        role = Role.objects.create(name=name, description=f"{name} (test role)")
        role.actions.set([permission_for(action) for action in actions])
        ensure_grant_permissions(role)
        return role

    return make


@pytest.fixture
def hooks_dir(tmp_path, settings):
    """add_hook(event, name, body) -> an executable hook script in a fresh CORRAL_HOOKS_DIR."""
    folder = tmp_path / "hooks"
    folder.mkdir()
    settings.CORRAL_HOOKS_DIR = folder

    def add_hook(event: str, name: str, body: str) -> Path:
        (folder / event).mkdir(exist_ok=True)
        script = folder / event / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return script

    add_hook.folder = folder
    return add_hook


class JobThread(threading.Thread):
    """Runs one job in-process on its own thread (and database connection)."""

    def __init__(self, job_id: int):
        super().__init__(name=f"job-{job_id}", daemon=True)
        self.job_id = job_id
        self.outcome = None

    def run(self) -> None:
        try:
            self.outcome = jobs.run(self.job_id, OPERATION_BY_KIND)
        finally:
            connection.close()


@pytest.fixture
def job_in_thread():
    """job_in_thread(job) -> a started JobThread; joined at the end of the test."""
    started = []

    def start(job: Job) -> JobThread:
        thread = JobThread(job.pk)
        thread.start()
        started.append(thread)
        return thread

    yield start
    for thread in started:
        thread.join(30)


@pytest.fixture
def image_store(settings, tmp_path):
    """An image store of the test's own (CORRAL_IMAGE_STORE)."""
    store = tmp_path / "images"
    settings.CORRAL_IMAGE_STORE = store
    return store


@pytest.fixture
def make_image(db, image_store):
    """make_image(kind="disk", content=b"...", **fields) -> an Image with its file stored."""
    import hashlib

    from hosts.models import Image
    from tests.conftest import unique

    def make(kind: str = "disk", content: bytes = b"\0" * 1024, **fields) -> Image:
        image_store.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(content).hexdigest()
        fields.setdefault("name", unique("image"))
        fields.setdefault("format", "raw")
        image = Image.objects.create(
            kind=kind,
            size_bytes=len(content),
            virtual_size_bytes=len(content),
            sha256=digest,
            file=f"image-{fields['name']}",
            **fields,
        )
        (image_store / image.file).write_bytes(content)
        return image

    return make


@pytest.fixture(scope="session")
def light_server():
    """One process serving light simulated hosts (lab/lightsim/server.py) for the whole run."""
    from django.conf import settings

    server = simhosts.LightServer(settings.CORRAL_SIMHOSTS_DIR / f"light-tests-{os.getpid()}")
    simhosts.start_light(server)
    yield server
    simhosts.stop_light(server)
    shutil.rmtree(server.directory, ignore_errors=True)


@pytest.fixture
def light_hosts(db, light_server, make_cluster):
    """light_hosts(count, vms=0, latency_ms=0) -> new light hosts (each with ``vms`` running
    domains) registered in a new cluster, not synced yet."""

    def make(count: int, vms: int = 0, latency_ms: float = 0) -> list[Host]:
        cluster = make_cluster()
        hosts = []
        for _ in range(count):
            name = unique("light")
            uri = light_server.uri(name)
            lightsim.control(uri, "add", vms=vms, latency_ms=latency_ms)
            hosts.append(Host(name=name, cluster=cluster, uri=uri))
        Host.objects.bulk_create(hosts)
        return list(Host.objects.filter(cluster=cluster).order_by("pk"))

    return make


def run_pending_jobs() -> list:
    """Run every queued job here, oldest first (those queued meanwhile too), as a task worker
    would; each must succeed. The jobs that ran."""
    ran = []
    while job := Job.objects.filter(state=JobState.PENDING).order_by("pk").first():
        jobs.run(job.pk, OPERATION_BY_KIND)
        job.refresh_from_db()
        assert job.state == JobState.SUCCEEDED, (job.kind, job.error_code, job.error_message)
        ran.append(job)
    return ran


@pytest.fixture
def qemu_host(qemu_daemons, make_cluster):
    """The first QEMU host in a cluster of its own, synced; what its VMs leave is removed."""
    from hosts.driver.libvirt import volumes

    host = Host.objects.create(name=unique("qemu"), cluster=make_cluster(), uri=qemu_daemons[0].uri)
    sync.sync_host(host.pk)
    host.refresh_from_db()
    yield host
    for vm in VirtualMachine.objects.filter(cluster=host.cluster):
        driver.undefine(host.uri, str(vm.uuid))
        volumes.delete(host.uri, "corral", f"{vm.uuid}.qcow2")


@pytest.fixture
def ssh_lab_host(qemu_daemons, make_cluster):
    """The first QEMU host in a cluster of its own, publishing its guests' SSH ports on the
    loopback as ``make run``'s lab does; what its VMs leave there is removed afterwards."""
    from hosts.driver.libvirt import volumes
    from lab import qemuhosts

    daemon = qemu_daemons[0]
    low, high = qemuhosts.guest_ssh_ports(daemon)
    host = Host.objects.create(
        name=unique("qemu"),
        cluster=make_cluster(),
        uri=daemon.uri,
        guest_ssh_port_min=low,
        guest_ssh_port_max=high,
    )
    sync.sync_host(host.pk)
    yield host
    for vm in VirtualMachine.objects.filter(cluster=host.cluster):
        driver.undefine(host.uri, str(vm.uuid))
        volumes.delete(host.uri, "corral", f"{vm.uuid}.qcow2")


@pytest.fixture(scope="module")
def running_tiny_guest(qemu_daemons, tiny_guest):
    """The tiny guest (a VNC screen, shells on its screen and serial console) booted on the
    first QEMU host, once for the test module: (its daemon, the ``Guest``)."""
    import libvirt

    from tests.hosts.driver.guests import Guest

    daemon = qemu_daemons[0]
    conn = libvirt.open(daemon.uri)
    guest = Guest(conn, conn.storagePoolLookupByName("corral"), tiny_guest)
    try:
        guest.boot()
        yield daemon, guest
    finally:
        guest.remove()
        conn.close()


@pytest.fixture
def tiny_guest_vm(running_tiny_guest, make_cluster, make_template, make_vm, make_user, grant):
    """The running tiny guest as a Corral VM, Up on its host, and its user (who may operate
    it)."""
    daemon, guest = running_tiny_guest
    cluster = make_cluster()
    host = Host.objects.create(name=unique("qemu"), cluster=cluster, uri=daemon.uri, status="up")
    template = make_template(vcpus=1, memory_mb=128, disk_gb=1, graphics="vnc")
    user = make_user()
    vm = make_vm(cluster=cluster, template=template, host=host, status="up", owner=user)
    VirtualMachine.objects.filter(pk=vm.pk).update(uuid=guest.uuid)
    grant(user, "UserRole", vm)
    vm.refresh_from_db()
    return vm, user
