"""Real guests on real QEMU hosts (two session daemons started for the scenario): the tiny
guest's cold start through Corral's start job, a prestarted VM's allocate-to-console time, and
how fast images reach a host. Skipped, with a row saying so, where QEMU cannot run.

- cold start: from submitting the start job to the first ``corral-guest:`` line in the VM's
  serial log volume (read through libvirt, as the console log is); the images are on the host
  already, so this is Corral's job plus QEMU's boot;
- allocate-to-console: ``POST /api/vmpools/{id}/allocatevm/``, ``POST /api/vms/{id}/console/``
  and the console websocket's first bytes (``RFB 003.008``), for a VM the pool kept running;
- allocate-to-SSH: the same for a pool whose template names a login account, up to the first
  ``ssh … hostname`` with the user's key (the guest's SSH published on the host's loopback),
  beside its floor (the guest agent's call plus that one SSH command);
- serial terminal: ``POST /api/vms/{id}/serial-console/`` to the serial websocket's first
  bytes: the console's last lines with the prompt the guest's shell printed before anyone
  connected (read from its log as the terminal opens); then, beside it, to the first byte the
  guest sends back live for a ``\r`` typed at once: QEMU notices that its pty has a reader
  again only on a once-a-second timer, so that figure falls anywhere up to about 1 s.
  Medians of a few terminals opened one after the other;
- image distribution: the tiny guest's kernel, initrd and disk copied to a host by the copy
  job (``hosts/operations/disks.py``: libvirt upload streams, checksum verified), in MB/s;
- images from VMs (``images_from_vms``): an image of a running VM (copied live) and of a
  stopped one, from asking to the job done, beside the same libvirt calls alone (and
  ``qemu-img convert`` run directly); the tiny guest, and the Debian cloud image where built.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import libvirt
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from hosts import driver, images, jobs, sync, vm_images
from hosts.driver.libvirt import exports, guests, volumes
from hosts.guests import guestinfo
from hosts.models import (
    Cluster,
    CopyState,
    Host,
    Image,
    ImageCopy,
    Job,
    JobKind,
    JobState,
    Template,
    VirtualMachine,
    VmStatus,
)
from hosts.operations import OPERATION_BY_KIND
from lab import demo as labdemo
from lab import qemuhosts, tinyguest
from pools import monitor
from pools.models import VmPool
from pools.services import create_pool
from project.access.grants import grant_role
from project.models import Role
from project.sshkeys import add_key

User = get_user_model()
FIRST_LINE = b"corral-guest:"
COLD_STARTS = 3
COPIES = 3
TERMINALS = 5
TIMEOUT_S = 120
IMAGES = 3


def _run_pending(pool: VmPool) -> None:
    """Run the pool's pending jobs here, in order (jobs other scenarios left are theirs)."""
    while job := Job.objects.filter(state=JobState.PENDING, vm__pool=pool).order_by("pk").first():
        jobs.run(job.pk, OPERATION_BY_KIND)
        job.refresh_from_db()
        if job.state != JobState.SUCCEEDED:
            raise RuntimeError(f"job {job.kind} failed: {job.error_message}")


def _wait(check, what: str):
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def _template(guest, name: str = "bench-tiny", images: str = "bench", **fields) -> Template:
    """A template booting ``guest``'s kernel, initrd and disk (a tiny guest or cloud image),
    its images registered once as ``bench-kernel``, ``bench-initrd``, ``bench-disk`` (another
    prefix than ``bench`` with ``images``)."""
    fields = {
        "vcpus": 1,
        "memory_mb": 128,
        "disk_gb": 1,
        "kernel_cmdline": "console=ttyS0",
        "graphics": "vnc",
        "guest_agent": True,
        **fields,
    }
    return Template.objects.create(
        name=name,
        kernel_image=labdemo.register_image(guest.kernel, f"{images}-kernel", "kernel"),
        initrd_image=labdemo.register_image(guest.initrd, f"{images}-initrd", "initrd"),
        disk_image=labdemo.register_image(guest.disk, f"{images}-disk", "disk"),
        **fields,
    )


def _lab_host(daemon, cluster: Cluster) -> Host:
    """``daemon`` as a host of ``cluster``, publishing its guests' SSH ports (synced)."""
    low, high = qemuhosts.guest_ssh_ports(daemon)
    host = Host.objects.create(
        name=daemon.name,
        cluster=cluster,
        uri=daemon.uri,
        guest_ssh_port_min=low,
        guest_ssh_port_max=high,
    )
    sync.sync_host(host.pk)
    return host


def _user_with_key(username: str, folder: Path) -> tuple[User, Path]:
    """The user (their earlier runs' keys gone) with a fresh ed25519 key: (user, private key)."""
    user, _ = User.objects.get_or_create(username=username)
    user.ssh_keys.all().delete()
    key = folder / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    add_key(user, "bench", (folder / "key.pub").read_text().strip())
    return user, key


def _distribution(template: Template, host: Host) -> float:
    """Median MB/s of copying the template's images to ``host`` (removed between runs)."""
    images = [template.kernel_image, template.initrd_image, template.disk_image]
    total = sum(image.size_bytes for image in images)
    rates = []
    for _ in range(COPIES):
        for image in images:
            volumes.delete(host.uri, host.storage_pool, image.volume_name)
        ImageCopy.objects.filter(host=host).delete()
        start = time.perf_counter()
        for image in images:
            jobs.run(
                jobs.submit(JobKind.COPY_IMAGE, host=host, params={"image": image.pk}).pk,
                OPERATION_BY_KIND,
            )
        rates.append(total / 1e6 / (time.perf_counter() - start))
        assert ImageCopy.objects.filter(host=host, state=CopyState.READY).count() == 3
    return statistics.median(rates)


def _serial_log(host: Host, vm: VirtualMachine) -> bytes:
    try:
        return guests.read_volume(host.uri, guests.log_volume(str(vm.uuid))) or b""
    except driver.DriverError:  # the pool is busy making the VM's disk
        return b""


def _cold_start(template: Template, cluster: Cluster, host: Host) -> float:
    """Seconds from submitting a start job to the guest's first line in its serial log."""
    vm = VirtualMachine.objects.create(
        name=f"cold-{time.monotonic_ns()}",
        cluster=cluster,
        template=template,
        vcpus=1,
        memory_mb=128,
        disk_gb=1,
        pinned_host=host,
    )
    start = time.perf_counter()
    job = jobs.submit(JobKind.START, vm=vm)
    runner = threading.Thread(target=jobs.run, args=(job.pk, OPERATION_BY_KIND))
    runner.start()
    try:
        _wait(lambda: FIRST_LINE in _serial_log(host, vm), "the first serial line")
        seconds = time.perf_counter() - start
    finally:
        runner.join(TIMEOUT_S)
    jobs.run(jobs.submit(JobKind.POWEROFF, vm=vm).pk, OPERATION_BY_KIND)
    jobs.run(jobs.submit(JobKind.DELETE, vm=vm).pk, OPERATION_BY_KIND)
    return seconds


async def _greeting(path: str, cookie: str) -> bytes:
    from project.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"cookie", cookie.encode())]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=30)
    if not connected:
        return b""
    greeting = b""
    while len(greeting) < 12:
        greeting += await communicator.receive_from(timeout=30)
    await communicator.disconnect()
    return greeting


async def _terminal(path: str, cookie: str, start: float) -> tuple[float, float]:
    """Seconds from ``start`` (the ticket asked for) to the terminal's first bytes (the
    console's last lines, its prompt last), and to the first byte the guest sends back live
    for a key typed then."""
    from project.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"cookie", cookie.encode())]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=30)
    if not connected:
        raise RuntimeError("the serial terminal refused its ticket")
    shown = await communicator.receive_from(timeout=30)
    prompt = time.perf_counter() - start
    if b"$ " not in shown:
        raise RuntimeError(f"the terminal opened on {shown[-80:]!r}, no prompt")
    await communicator.send_to(bytes_data=b"\r")
    await communicator.receive_from(timeout=30)
    live = time.perf_counter() - start
    await communicator.disconnect()
    return prompt, live


def _serial_terminal(vm: VirtualMachine, api: APIClient, cookie: str) -> list[tuple[float, float]]:
    """For each of ``TERMINALS`` terminals opened one after the other: seconds from asking for
    a running VM's serial terminal to its prompt on screen, and to the first live byte."""
    _wait(lambda: b"corral-guest: booted" in _serial_log(vm.host, vm), "the guest's shell")
    figures = []
    for _ in range(TERMINALS):
        start = time.perf_counter()
        url = api.post(f"/api/vms/{vm.pk}/serial-console/").json()["url"]
        figures.append(async_to_sync(_terminal)(url.removeprefix("ws://testserver"), cookie, start))
    return figures


def _allocate_to_console(
    template: Template, cluster: Cluster
) -> tuple[float, list[tuple[float, float]]]:
    """Seconds from asking for a VM of a pool (one kept running) to its screen's greeting, and
    from asking for its serial terminal to its first byte."""
    pool = create_pool(
        VmPool(name="bench-tiny", cluster=cluster, template=template, size=1, prestarted_vms=1)
    )
    _run_pending(pool)
    monitor.run_for_pool(pool.pk)
    _run_pending(pool)
    vm = VirtualMachine.objects.get(pool=pool)

    def shown():
        guestinfo.refresh_host(vm.host_id)
        fresh = VirtualMachine.objects.get(pk=vm.pk)
        return fresh.status == VmStatus.UP and fresh.graphics_port

    _wait(shown, "the prestarted VM's screen")
    user, _ = User.objects.get_or_create(username="bench-console")
    grant_role(Role.objects.get(name="UserRole"), pool, user=user)
    api = APIClient()
    api.force_authenticate(user)
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    start = time.perf_counter()
    taken = api.post(f"/api/vmpools/{pool.pk}/allocatevm/").json()
    url = api.post(f"/api/vms/{taken['vm']['id']}/console/").json()["url"]
    greeting = async_to_sync(_greeting)(url.removeprefix("ws://testserver"), cookie)
    seconds = time.perf_counter() - start
    if not greeting.startswith(b"RFB 003.008"):
        raise RuntimeError(f"the console answered {greeting!r}")
    vm.refresh_from_db()
    terminal = _serial_terminal(vm, api, cookie)
    jobs.run(jobs.submit(JobKind.POWEROFF, vm=vm).pk, OPERATION_BY_KIND)
    return seconds, terminal


def _ssh(key: Path, details: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", "-i", str(key), "-p", str(details["port"]), "-o", "BatchMode=yes",
         "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
         f"{details['user']}@{details['host']}", "hostname"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def _allocate_to_ssh(tiny, cluster: Cluster) -> tuple[float, float]:
    """Seconds from asking for a VM of a pool (one kept running, no user yet) to the first
    command its user runs over SSH with their key: the allocation, the guest_keys job (run here,
    as a task worker runs it: the queue's hand-over is not counted), the API's ``ssh`` details
    and ``ssh … hostname``. Then the floor for the same guest: the agent call alone plus the
    same SSH command."""
    template = _template(tiny, "bench-tiny-ssh", login_user=tinyguest.LOGIN_USER)
    pool = create_pool(
        VmPool(
            name="bench-ssh",
            cluster=cluster,
            template=template,
            size=1,
            prestarted_vms=1,
            stateless=False,
        )
    )
    _run_pending(pool)
    monitor.run_for_pool(pool.pk)
    _run_pending(pool)  # the start, then the keys job (which waits for the agent)
    folder = Path(tempfile.mkdtemp(prefix="bench-ssh-"))
    user, key = _user_with_key("bench-ssh", folder)
    public = (folder / "key.pub").read_text().strip()
    grant_role(Role.objects.get(name="UserRole"), pool, user=user)
    api = APIClient()
    api.force_authenticate(user)
    try:
        start = time.perf_counter()
        taken = api.post(f"/api/vmpools/{pool.pk}/allocatevm/").json()
        _run_pending(pool)
        details = api.get(f"/api/vms/{taken['vm']['id']}/").json()["ssh"]
        answer = _ssh(key, details)
        seconds = time.perf_counter() - start
        if answer.returncode != 0:
            raise RuntimeError(f"ssh failed: {answer.stderr.strip()}")
        vm = VirtualMachine.objects.select_related("host").get(pk=taken["vm"]["id"])
        start = time.perf_counter()
        guests.set_authorized_keys(vm.host.uri, str(vm.uuid), tinyguest.LOGIN_USER, [public])
        floor_answer = _ssh(key, details)
        floor = time.perf_counter() - start
        if floor_answer.returncode != 0:
            raise RuntimeError(f"ssh failed: {floor_answer.stderr.strip()}")
        jobs.run(jobs.submit(JobKind.POWEROFF, vm=vm).pk, OPERATION_BY_KIND)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return seconds, floor


def real_guests(measure):
    if shutil.which("qemu-system-x86_64") is None:
        return [("real QEMU guests", "skipped: no qemu-system-x86_64 here", "", "")]
    store = Path(tempfile.mkdtemp(prefix="bench-images-"))
    settings.CORRAL_IMAGE_STORE = store
    daemons = [
        qemuhosts.QemuHost(name=f"bench-{i}", directory=qemuhosts.new_directory()) for i in (1, 2)
    ]
    try:
        for daemon in daemons:
            qemuhosts.start(daemon)
        cluster = Cluster.objects.create(name="bench-qemu")
        hosts = [_lab_host(daemon, cluster) for daemon in daemons]
        template = _template(tinyguest.build())
        mb_per_s = _distribution(template, hosts[1])
        _distribution(template, hosts[0])  # the images on the first host before its boots
        cold = [_cold_start(template, cluster, hosts[0]) for _ in range(COLD_STARTS)]
        console, terminal = _allocate_to_console(template, cluster)
        prompts, lives = [p for p, _ in terminal], [live for _, live in terminal]
        to_ssh, ssh_floor = _allocate_to_ssh(tinyguest.build(), cluster)
        accel = "KVM" if Host.objects.get(pk=hosts[0].pk).domain_type == "kvm" else "TCG"
        size_mb = (
            sum(
                image.size_bytes
                for image in (template.kernel_image, template.initrd_image, template.disk_image)
            )
            / 1e6
        )
        return [
            (
                f"tiny guest: start job submitted to first serial line (median of {COLD_STARTS})",
                f"{statistics.median(cold):.2f} s (min {min(cold):.2f}, max {max(cold):.2f})",
                "≤ 10 s",
                "yes" if statistics.median(cold) <= 10 else "NO",
            ),
            (
                "prestarted VM: allocate, console ticket, websocket RFB greeting",
                f"{console * 1000:.0f} ms",
                "≤ 1 s",
                "yes" if console <= 1 else "NO",
            ),
            (
                f"prestarted VM ({accel}): allocate to the first SSH command with the user's key",
                f"{to_ssh:.2f} s (floor, agent call + ssh: {ssh_floor:.2f} s)",
                "≤ 2 s",
                "yes" if to_ssh <= 2 else "NO",
            ),
            (
                f"serial terminal: ticket → prompt on screen (median of {TERMINALS})",
                f"{statistics.median(prompts) * 1000:.0f} ms (first live byte after a key: "
                f"{statistics.median(lives) * 1000:.0f} ms, QEMU's pty timer)",
                "≤ 0.5 s",
                "yes" if statistics.median(prompts) <= 0.5 else "NO",
            ),
            (
                f"image distribution: tiny guest's images ({size_mb:.1f} MB) to a host",
                f"{mb_per_s:.0f} MB/s",
                "≥ 50 MB/s",
                "yes" if mb_per_s >= 50 else "NO",
            ),
        ]
    finally:
        tear_down(daemons, store)


def tear_down(daemons, *folders: Path, cluster: str = "bench-qemu") -> None:
    """Undo what a scenario set up: its VMs taken off the hosts, the hosts' daemons stopped
    with all they left, its folders and its rows (so that the scenarios after it start clean)."""
    for vm in VirtualMachine.objects.filter(cluster__name=cluster):
        for daemon in daemons:
            with contextlib.suppress(Exception):
                driver.undefine(daemon.uri, str(vm.uuid))
    for daemon in daemons:
        qemuhosts.stop(daemon)
        qemuhosts.kill_leftovers(daemon)
        shutil.rmtree(daemon.directory, ignore_errors=True)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    Job.objects.filter(host__cluster__name=cluster).delete()
    Job.objects.filter(vm__cluster__name=cluster).delete()
    VirtualMachine.objects.filter(cluster__name=cluster).delete()
    VmPool.objects.filter(cluster__name=cluster).delete()
    Host.objects.filter(cluster__name=cluster).delete()
    Cluster.objects.filter(name=cluster).delete()
    Template.objects.filter(name__startswith="bench-").delete()
    Image.objects.filter(name__startswith="bench-").delete()


def cloud_image_boot(measure):
    """The Debian cloud image (lab/cloudimage.py, built once per package versions and cached)
    started cold as a user's VM through Corral's start job, to the first ``ssh … true`` with
    the owner's key through the lab host's loopback port: real cloud-init taking Corral's
    seed on the way. One boot; KVM where the lab host can use it, TCG otherwise."""
    from lab import cloudimage

    if shutil.which("qemu-system-x86_64") is None or shutil.which("mmdebstrap") is None:
        return [("cloud image: cold start to SSH", "skipped: no QEMU or mmdebstrap here", "", "")]
    try:
        image = cloudimage.build()
    except cloudimage.CloudImageError as exc:
        return [("cloud image: cold start to SSH", f"skipped: not built ({exc})", "", "")]
    store = Path(tempfile.mkdtemp(prefix="bench-images-"))
    settings.CORRAL_IMAGE_STORE = store
    daemon = qemuhosts.QemuHost(name="bench-cloud", directory=qemuhosts.new_directory())
    folder = Path(tempfile.mkdtemp(prefix="bench-ssh-"))
    try:
        qemuhosts.start(daemon)
        cluster = Cluster.objects.create(name="bench-qemu")
        host = _lab_host(daemon, cluster)
        template = _template(
            image,
            "bench-tiny-ssh",
            vcpus=2,
            memory_mb=cloudimage.MEMORY_MIB,
            disk_gb=2,
            kernel_cmdline=cloudimage.KERNEL_CMDLINE,
            login_user=cloudimage.LOGIN_USER,
        )
        owner, key = _user_with_key("bench-ssh", folder)
        vm = VirtualMachine.objects.create(
            name="bench-cloud",
            cluster=cluster,
            template=template,
            owner=owner,
            vcpus=2,
            memory_mb=cloudimage.MEMORY_MIB,
            disk_gb=2,
        )
        # The image's copy to the host is not part of a cold start: made ahead, as a pool does.
        for image_row in (template.kernel_image, template.initrd_image, template.disk_image):
            jobs.run(
                jobs.submit(JobKind.COPY_IMAGE, host=host, params={"image": image_row.pk}).pk,
                OPERATION_BY_KIND,
            )
        start = time.perf_counter()
        jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND)
        vm.refresh_from_db()
        details = {"user": cloudimage.LOGIN_USER, "host": "127.0.0.1", "port": vm.ssh_port}
        deadline = time.monotonic() + 600
        while _ssh(key, details).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("no SSH login within 600 s")
            time.sleep(1)
        seconds = time.perf_counter() - start
        accel = "KVM" if Host.objects.get(pk=host.pk).domain_type == "kvm" else "TCG"
        goal = 20 if accel == "KVM" else None
        return [
            (
                f"cloud image ({accel}): start job to the owner's first SSH login (cold)",
                f"{seconds:.1f} s",
                "≤ 20 s on KVM" if goal else "(TCG: no goal; KVM's is ≤ 20 s)",
                ("yes" if seconds <= goal else "NO") if goal else "",
            )
        ]
    finally:
        tear_down([daemon], store, folder)


def _boots(host: Host, vm: VirtualMachine) -> int:
    """How many times the tiny guest booted up to its shell (its log is appended to)."""
    return _serial_log(host, vm).count(b"corral-guest: booted")


def _booted(host: Host, vm: VirtualMachine) -> bool:
    return _boots(host, vm) > 0


def _agent_answers(host: Host, vm: VirtualMachine) -> bool:
    conn = libvirt.open(host.uri)
    try:
        conn.lookupByUUIDString(str(vm.uuid)).getTime()
    except libvirt.libvirtError:
        return False
    finally:
        conn.close()
    return True


def _vm_up(template: Template, host: Host, owner, name: str, up=_agent_answers) -> VirtualMachine:
    """A VM of ``template`` started on ``host`` (its images copied ahead, as a pool does), once
    the guest is ``up`` (its agent answers, unless told otherwise)."""
    for image in (template.kernel_image, template.initrd_image, template.disk_image):
        job = jobs.submit(JobKind.COPY_IMAGE, host=host, params={"image": image.pk})
        jobs.run(job.pk, OPERATION_BY_KIND)
    vm = VirtualMachine.objects.create(
        name=name,
        cluster=host.cluster,
        template=template,
        owner=owner,
        vcpus=template.vcpus,
        memory_mb=template.memory_mb,
        disk_gb=template.disk_gb,
        pinned_host=host,
    )
    jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND)
    vm.refresh_from_db()
    deadline = time.monotonic() + 600
    while not up(host, vm):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}'s guest never came up")
        time.sleep(0.5)
    return vm


def _image_job(vm: VirtualMachine, owner) -> tuple[float, int, dict]:
    """Seconds from asking for an image of ``vm`` to its job done (run here, as a task worker
    runs it), the image's size and the job's result; the image is deleted after."""
    start = time.perf_counter()
    job, image = vm_images.request_image(
        vm, name=f"bench-image-{time.monotonic_ns()}", requested_by=owner
    )
    jobs.run(job.pk, OPERATION_BY_KIND)
    seconds = time.perf_counter() - start
    job.refresh_from_db()
    if job.state != JobState.SUCCEEDED:
        raise RuntimeError(f"the image job ended {job.state}: {job.error_message}")
    image.refresh_from_db()
    images.delete_image(image)
    return seconds, image.size_bytes, job.result


def _export_floor(host: Host, vm: VirtualMachine, *, quiesce: bool) -> float:
    """Seconds of the driver's call alone (libvirt's copy on the host and its download, hashed
    as it arrives, the temporary volume deleted), into a file deleted after."""
    with tempfile.TemporaryDirectory(prefix="bench-export-") as folder:
        start = time.perf_counter()
        exports.export_disk(
            host.uri,
            str(vm.uuid),
            host.storage_pool,
            f"{vm.uuid}.qcow2",
            f"{folder}/disk.qcow2",
            quiesce=quiesce,
            limit=settings.CORRAL_IMAGE_MAX_BYTES,
        )
        return time.perf_counter() - start


def _convert_floor(host: Host, vm: VirtualMachine) -> float:
    """Seconds of ``qemu-img convert`` flattening the stopped VM's disk, run on the host's
    file directly (a lab host is on this machine): what libvirt's clone runs."""
    source = driver.volume_path(host.uri, host.storage_pool, f"{vm.uuid}.qcow2")
    with tempfile.TemporaryDirectory(prefix="bench-convert-") as folder:
        start = time.perf_counter()
        subprocess.run(
            ["qemu-img", "convert", "-f", "qcow2", "-O", "qcow2", source, f"{folder}/disk.qcow2"],
            check=True,
        )
        return time.perf_counter() - start


def _median(figures) -> str:
    return f"{statistics.median(figures):.2f} s"


def _image_rows(label: str, vm: VirtualMachine, owner, host: Host) -> list[tuple]:
    """An image of ``vm`` running (a live copy: its agent freezes the guest), then stopped,
    each beside its floor."""
    # Each job beside its floor in turn: the host's page cache and the machine's load then
    # favour neither.
    live, live_floor = [], []
    for _ in range(IMAGES):
        live.append(_image_job(vm, owner))
        live_floor.append(_export_floor(host, vm, quiesce=True))
    if not all(result["live"] for _, _, result in live):
        raise RuntimeError("the running VM was not copied live")
    jobs.run(jobs.submit(JobKind.POWEROFF, vm=vm).pk, OPERATION_BY_KIND)
    cold, cold_floor, convert = [], [], []
    for _ in range(IMAGES):
        cold.append(_image_job(vm, owner))
        cold_floor.append(_export_floor(host, vm, quiesce=False))
        convert.append(_convert_floor(host, vm))
    live_mb, cold_mb = live[0][1] / 1e6, cold[0][1] / 1e6
    live_s = [seconds for seconds, _, _ in live]
    cold_s = [seconds for seconds, _, _ in cold]
    return [
        (
            f"{label}, running: image job, asked to ready ({live_mb:.0f} MB, median of {IMAGES})",
            f"{_median(live_s)} (floor, the driver's call alone: {_median(live_floor)}; "
            f"{_added(live_s, live_floor)})",
            "Corral adds ≤ 1 s",
            _met(live_s, live_floor),
        ),
        (
            f"{label}, stopped: image job, asked to ready ({cold_mb:.0f} MB, median of {IMAGES})",
            f"{_median(cold_s)} (floor, the driver's call alone: {_median(cold_floor)}; "
            f"{_added(cold_s, cold_floor)}; qemu-img convert alone: {_median(convert)})",
            "Corral adds ≤ 1 s",
            _met(cold_s, cold_floor),
        ),
    ]


def _overhead(jobs_s: list[float], floors: list[float]) -> float:
    """What the job adds to its floor: the median over the pairs run one after the other (the
    copy's own time varies more from one minute to the next on a busy machine)."""
    return statistics.median(job - floor for job, floor in zip(jobs_s, floors, strict=True))


def _added(jobs_s: list[float], floors: list[float]) -> str:
    return f"Corral adds {_overhead(jobs_s, floors):.2f} s"


def _met(jobs_s: list[float], floors: list[float]) -> str:
    return "yes" if _overhead(jobs_s, floors) <= 1 else "NO"


def images_from_vms(measure):
    """Images made from VMs (``hosts/operations/vm_image.py``): the tiny guest running (a live
    copy: a block copy cut while its agent freezes its filesystems) and stopped (its volume
    cloned, the backing chain flattened), each from asking for the image to the job done,
    beside its floor (the driver's call alone: libvirt's copy and download, hashed as it
    arrives; for a stopped VM also ``qemu-img convert`` run on the host's file); the tiny guest
    without an agent (shut down, copied, started again); the Debian cloud image the same where
    it is built."""
    if shutil.which("qemu-system-x86_64") is None:
        return [("images from VMs", "skipped: no qemu-system-x86_64 here", "", "")]
    store = Path(tempfile.mkdtemp(prefix="bench-images-"))
    settings.CORRAL_IMAGE_STORE = store
    daemon = qemuhosts.QemuHost(name="bench-image", directory=qemuhosts.new_directory())
    try:
        qemuhosts.start(daemon)
        host = _lab_host(daemon, Cluster.objects.create(name="bench-qemu"))
        owner, _ = User.objects.get_or_create(username="bench-images")
        tiny = tinyguest.build()
        vm = _vm_up(_template(tiny, "bench-tiny"), host, owner, "bench-tiny-image")
        rows = _image_rows("tiny guest", vm, owner, host)
        plain = _template(tiny, "bench-tiny-no-agent", guest_agent=False)
        vm = _vm_up(plain, host, owner, "bench-no-agent", up=_booted)
        stop_start = []
        for _ in range(IMAGES):
            boots = _boots(host, vm)
            stop_start.append(_image_job(vm, owner))
            # Up again before the next: a guest still booting ignores the power button.
            _wait(lambda before=boots: _boots(host, vm) > before, "the guest's boot")
        rows.append(
            (
                f"tiny guest running without an agent: shut down, copied, started again "
                f"(median of {IMAGES})",
                _median([seconds for seconds, _, _ in stop_start]),
                "(reference)",
                "",
            )
        )
        return rows + _cloud_image_rows(host, owner)
    finally:
        tear_down([daemon], store)


def _cloud_image_rows(host: Host, owner) -> list[tuple]:
    from lab import cloudimage

    label = "cloud image (Debian 12)"
    if shutil.which("mmdebstrap") is None:
        return [(label, "skipped: no mmdebstrap here", "", "")]
    try:
        built = cloudimage.build()
    except cloudimage.CloudImageError as exc:
        return [(label, f"skipped: not built ({exc})", "", "")]
    template = _template(
        built,
        "bench-cloud-image",
        images="bench-cloud",
        vcpus=2,
        memory_mb=cloudimage.MEMORY_MIB,
        disk_gb=2,
        kernel_cmdline=cloudimage.KERNEL_CMDLINE,
    )  # no login account: no keys job queued on the VM ahead of the image jobs
    vm = _vm_up(template, host, owner, "bench-cloud-image")
    return _image_rows(label, vm, owner, host)
