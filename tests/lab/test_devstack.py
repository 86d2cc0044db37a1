"""`make run`'s last step, `manage.py devstack`: three simulated hosts, a real QEMU host, a task
cluster and the web server with the demo; the demo pool's VMs come up on the hosts and the lab
pool's tiny guest on the QEMU host; Ctrl-C stops all of it and leaves no daemon, guest, task
cluster or web server behind. A second run finds a user's VM as the first left it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.utils import timezone

from hosts import driver
from hosts.models import Host, HostStatus, Job, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from lab import qemuhosts
from lab.childprocess import database_env, free_port
from pools.models import VmPool
from project.models import Event, EventKind
from tests.conftest import wait_until
from tests.reliability.conftest import REPO, token_for

pytestmark = pytest.mark.slow

UP_S = 90
STOP_S = 45


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return [p for p in found if _alive(p)]


@pytest.fixture
def start_devstack(transactional_db, tmp_path):
    """start_devstack(*arguments) -> a running `manage.py devstack` (a second one after the
    first stopped finds the same database, simulated hosts' folder and port)."""
    simhosts_dir = Path("/tmp") / f"corral-devstack-{os.getpid()}-{tmp_path.name[-8:]}"
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_PATH")},
        **database_env(),
        "DJANGO_SETTINGS_MODULE": "project.test_settings",
        "DEBUG": "1",
        "CORRAL_SIMHOSTS_DIR": str(simhosts_dir),
        "CORRAL_HOOKS_DIR": str(tmp_path / "hooks"),
        "CORRAL_TICKER_RUN_SECONDS": "2",
        "VMPOOL_MONITOR_INTERVAL": "2",
        "CORRAL_SYNC_INTERVAL": "1",
    }
    runs = []

    def start(*arguments: str) -> subprocess.Popen:
        log_path = tmp_path / f"devstack-{len(runs)}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "manage.py", "devstack", "--addr", f"127.0.0.1:{port}"]
                + list(arguments),
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process.url = f"http://127.0.0.1:{port}"
        process.log = lambda: log_path.read_text(errors="replace")
        process.simhosts_dir = simhosts_dir
        runs.append(process)
        return process

    yield start
    for process in runs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for pid in _descendants(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    subprocess.run(
        [sys.executable, "manage.py", "simhosts", "stop"],
        cwd=REPO,
        env={**os.environ, "CORRAL_SIMHOSTS_DIR": str(simhosts_dir)},
        capture_output=True,
        check=False,
    )
    for host in qemuhosts.discover(simhosts_dir):  # their short folders live beside it
        shutil.rmtree(host.directory, ignore_errors=True)
    shutil.rmtree(simhosts_dir, ignore_errors=True)


@pytest.fixture
def devstack(start_devstack):
    return start_devstack()


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except (requests.ConnectionError, requests.Timeout):  # not up yet, or busy starting
        return False


def test_devstack_serves_the_demo_and_a_real_guest_and_ctrl_c_stops_everything(devstack):
    wait_until(
        lambda: _answers(f"{devstack.url}/api/docs/") and _answers(f"{devstack.url}/login/"),
        timeout=UP_S,
        message=lambda: f"the web server never answered: {devstack.log()[-3000:]}",
    )
    assert _answers(f"{devstack.url}/admin/login/")
    assert "Ctrl-C stops everything" in devstack.log()

    hosts = list(Host.objects.filter(cluster__name="demo").order_by("name"))
    assert len(hosts) == 3
    pool = VmPool.objects.get(name="demo-pool")
    assert VirtualMachine.objects.filter(name__regex=r"^demo-[0-9]+$").count() == 4
    assert sorted(pool.vms.values_list("name", flat=True)) == [
        f"demo-pool-{n}" for n in range(1, 5)
    ]

    def demo_running() -> bool:
        up_hosts = Host.objects.filter(cluster__name="demo", status=HostStatus.UP).count()
        running = VirtualMachine.objects.filter(pool=pool, status=VmStatus.UP)
        return up_hosts == 3 and running.count() >= pool.prestarted_vms

    wait_until(
        demo_running,
        timeout=UP_S,
        message=lambda: f"the demo never came up: {devstack.log()[-3000:]}",
    )
    for vm in VirtualMachine.objects.filter(pool=pool, status=VmStatus.UP):
        assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "running"

    # The lab: a real QEMU host whose pool keeps one tiny guest running, booted from images.
    lab_pool = VmPool.objects.get(name="lab-pool")
    assert lab_pool.cluster.name == "lab" and lab_pool.template.name == "tiny-qemu"
    assert lab_pool.template.disk_image.format == "qcow2"
    lab_vm = wait_until(
        lambda: VirtualMachine.objects.filter(pool=lab_pool, status=VmStatus.UP).first(),
        timeout=UP_S,
        message=lambda: f"the lab's VM never came up: {devstack.log()[-3000:]}",
    )
    assert driver.domain_power_state(lab_vm.host.uri, str(lab_vm.uuid)) == "running"
    assert lab_vm.host.domain_type in ("qemu", "kvm")

    started = _descendants(devstack.pid)
    daemon_pids = [
        int(pid_file.read_text())
        for pid_file in devstack.simhosts_dir.glob("*/corral-libvirtd.pid")
    ]
    assert len(daemon_pids) == 4 and all(_alive(pid) for pid in daemon_pids)  # 3 sim, 1 QEMU
    assert len(started) >= 3  # the task cluster, its workers and the web server
    # The QEMU host's libvirtd, its guest's QEMU and virtlogd.
    guest_pids = [
        p for h in qemuhosts.discover(devstack.simhosts_dir) for p in qemuhosts.leftover_pids(h)
    ]
    assert len(guest_pids) >= 2

    devstack.send_signal(signal.SIGINT)
    devstack.wait(STOP_S)

    assert devstack.returncode == 0, devstack.log()[-3000:]
    assert "Stopping: the web server and the task cluster (up to 5 s" in devstack.log()
    assert re.search(r"Stopped in \d+\.\d s\.", devstack.log())
    left = [pid for pid in [*started, *daemon_pids, *guest_pids] if _alive(pid)]
    assert left == [], f"still running after Ctrl-C: {left}"
    assert not _answers(f"{devstack.url}/login/")


def _serving(devstack) -> None:
    wait_until(
        lambda: _answers(f"{devstack.url}/login/"),
        timeout=UP_S,
        message=lambda: f"the web server never answered: {devstack.log()[-3000:]}",
    )


def _at_level(pool: VmPool) -> bool:
    """The pool runs as many free VMs as it keeps prestarted, and no job is on its way."""
    if Job.objects.filter(state__in=ACTIVE_JOB_STATES).exists():
        return False
    counts = VmPool.objects.with_counts().get(pk=pool.pk)
    return (counts.running_unassigned, counts.starting_vms) == (pool.prestarted_vms, 0)


def _synced_since(moment) -> bool:
    """Whether the running task cluster has read every demo host since ``moment``."""
    hosts = Host.objects.filter(cluster__name="demo")
    return all(h.last_seen_at is not None and h.last_seen_at > moment for h in hosts)


def test_after_ctrl_c_a_second_devstack_finds_a_users_vm_as_it_was(
    start_devstack, make_user, grant
):
    first = start_devstack("--lab", "")
    _serving(first)
    pool = VmPool.objects.get(name="demo-pool")
    wait_until(
        lambda: (
            VirtualMachine.objects.filter(pool=pool, status=VmStatus.UP).count()
            >= pool.prestarted_vms
        ),
        timeout=UP_S,
        message=lambda: f"the demo never came up: {first.log()[-3000:]}",
    )
    user = make_user()
    grant(user, "UserRole", pool)
    headers = token_for(user)
    taken = requests.post(
        f"{first.url}/api/vmpools/{pool.pk}/allocatevm/", headers=headers, timeout=30
    )
    assert taken.status_code == 200, taken.text
    vm = VirtualMachine.objects.get(pk=taken.json()["vm"]["id"])
    wait_until(
        lambda: _at_level(pool),
        timeout=UP_S,
        message=lambda: f"the pool never got back to its level: {first.log()[-3000:]}",
    )
    before = list(VirtualMachine.objects.filter(pool=pool).values_list("pk", "status", "host"))

    first.send_signal(signal.SIGINT)
    first.wait(STOP_S)
    assert first.returncode == 0, first.log()[-3000:]
    last_event, last_job = Event.objects.latest("pk").pk, Job.objects.latest("pk").pk
    started = timezone.now()
    second = start_devstack("--lab", "")
    _serving(second)

    def not_synced() -> str:
        return f"the hosts were not synced again: {second.log()[-3000:]}"

    wait_until(lambda: _synced_since(started), timeout=UP_S, message=not_synced)
    # Synced again past the grace a domain missing from a report has (two sync intervals).
    settled = timezone.now() + timedelta(seconds=3)
    wait_until(lambda: _synced_since(settled), timeout=UP_S, message=not_synced)

    shown = requests.get(f"{second.url}/api/vms/{vm.pk}/", headers=headers, timeout=30)
    assert shown.status_code == 200, shown.text  # still the user's
    assert (shown.json()["status"], shown.json()["owner"], shown.json()["host"]) == (
        "up",
        user.username,
        vm.host_id,
    )
    assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "running"
    after = list(VirtualMachine.objects.filter(pool=pool).values_list("pk", "status", "host"))
    assert after == before
    alerts = Event.objects.filter(pk__gt=last_event, kind=EventKind.ALERT)
    assert list(alerts.values_list("message", flat=True)) == []
    assert not Job.objects.filter(pk__gt=last_job).exists()
    second.send_signal(signal.SIGINT)
    second.wait(STOP_S)
