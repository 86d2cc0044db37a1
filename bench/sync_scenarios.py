"""Sync at scale: light simulated hosts synced by one, then two real task clusters.

    BENCH_SYNC_HOSTS=1000 make bench     # the documented run (default: 200 hosts)

Each host has 20 domains and answers after 20 ms (a remote libvirt call's order); each task
cluster syncs on its CORRAL_SYNC_THREADS (4). Capacity is measured with a 2 s sync interval,
short enough that more hosts are due than the clusters can sync (hosts synced per interval,
counted by the simulator); freshness with the default 5 s interval and two clusters (the
oldest ``last_seen_at`` seen while sampling).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from bench.fleet import make_fleet
from hosts.models import ExternalDomain, Host, HostStatus
from lab import simhosts
from lab.childprocess import start_task_cluster
from lab.lightsim import driver as lightsim
from lab.lightsim.server import NAMESPACE

HOSTS = int(os.environ.get("BENCH_SYNC_HOSTS", "200"))
VMS = 20
LATENCY_MS = 20
THREADS = 4  # CORRAL_SYNC_THREADS of each task cluster
# Short enough that more hosts are due than two clusters sync; a lease lasts one interval.
CAPACITY_INTERVAL = 2.0
ROOT = Path(__file__).resolve().parent.parent
LOGS = Path(os.environ.get("BENCH_LOGS", "/tmp"))


def _start_clusters(count: int, interval: float, logs: Path) -> list[subprocess.Popen]:
    return [
        start_task_cluster(
            logs / f"qcluster-{index}.log",
            Q_WORKERS="2",
            Q_POLL="0.5",
            CORRAL_SYNC_INTERVAL=interval,
            CORRAL_TICK_SECONDS="0.2",
            CORRAL_SYNC_THREADS=THREADS,
        )
        for index in range(count)
    ]


def _stop_clusters(clusters: list[subprocess.Popen]) -> None:
    for process in clusters:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _fleet(server: simhosts.LightServer) -> list[int]:
    """N light hosts, each with VMS running domains, stored as a first sync would leave them."""
    make_fleet(0, clusters=1)
    Host.objects.all().delete()  # only light hosts: the fleet's placeholder host has no daemon
    from hosts.models import Cluster

    cluster = Cluster.objects.get()
    hosts = []
    for index in range(1, HOSTS + 1):
        uri = server.uri(f"bench-{index}")
        lightsim.control(uri, "add", vms=VMS, latency_ms=LATENCY_MS)
        hosts.append(
            Host(
                name=f"light-{index}",
                cluster=cluster,
                uri=uri,
                status=HostStatus.UP,
                cpus=32,
                memory_mb=131072,
                memory_used_mb=0,
                reported_networks=["default"],
                last_seen_at=timezone.now(),
            )
        )
    Host.objects.bulk_create(hosts, batch_size=500)
    made = list(Host.objects.filter(cluster=cluster).order_by("pk"))
    ExternalDomain.objects.bulk_create(
        (
            ExternalDomain(
                host=host,
                uuid=uuid.uuid5(NAMESPACE, f"bench-{i}-vm-{n}"),
                name=f"bench-{i}-vm-{n}",
                power_state="running",
            )
            for i, host in enumerate(made, start=1)
            for n in range(1, VMS + 1)
        ),
        batch_size=1000,
    )
    return [host.pk for host in made]


def _reports(uri: str) -> int:
    return sum(h["reports"] for h in lightsim.control(uri, "stats")["hosts"].values())


def _settled(count: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owners = dict(Host.objects.values_list("sync_owner").annotate(n=_count()))
        if "" not in owners and len(owners) == count:
            return True
        time.sleep(0.5)
    return False


def _count():
    from django.db.models import Count

    return Count("pk")


def _phase(uri: str, clusters: int, interval: float, window: float) -> tuple[float, float]:
    """Hosts synced per interval, and the oldest last_seen_at age sampled (seconds)."""
    began = timezone.now()
    processes = _start_clusters(clusters, interval, LOGS)
    try:
        if not _settled(clusters, timeout=60 + HOSTS / 10):
            print(f"{clusters} task clusters never split the hosts", file=sys.stderr)
            return 0.0, float("inf")
        # Every host synced by these clusters once: what the last phase left no longer counts.
        deadline = time.monotonic() + 60 + HOSTS / 5
        while Host.objects.filter(last_seen_at__lt=began).exists():
            if time.monotonic() > deadline:
                print(f"{clusters} task clusters never synced every host", file=sys.stderr)
                return 0.0, float("inf")
            time.sleep(0.5)
        before, started = _reports(uri), time.monotonic()
        oldest = 0.0
        while time.monotonic() - started < window:
            seen = Host.objects.values_list("last_seen_at", flat=True)
            never = sum(at is None for at in seen)
            first = min((at for at in seen if at is not None), default=None)
            if never or first is None:
                return 0.0, float("inf")
            oldest = max(oldest, (timezone.now() - first).total_seconds())
            time.sleep(0.5)
        synced = _reports(uri) - before
        return synced / ((time.monotonic() - started) / interval), oldest
    finally:
        _stop_clusters(processes)
        time.sleep(interval + 1)  # their leases and heartbeats expire


def sharded_sync(measure):
    server = simhosts.LightServer(settings.CORRAL_SIMHOSTS_DIR / f"light-bench-{os.getpid()}")
    simhosts.start_light(server)
    try:
        _fleet(server)
        uri = server.uri("bench-1")
        one, _ = _phase(uri, 1, interval=CAPACITY_INTERVAL, window=4 * CAPACITY_INTERVAL)
        two, _ = _phase(uri, 2, interval=CAPACITY_INTERVAL, window=4 * CAPACITY_INTERVAL)
        interval = settings.CORRAL_SYNC_INTERVAL
        per_interval, oldest = _phase(uri, 2, interval=interval, window=4 * interval)
        with _other_work():
            busy_per_interval, busy_oldest = _phase(uri, 2, interval=interval, window=4 * interval)
    finally:
        simhosts.stop_light(server)
        shutil.rmtree(server.directory, ignore_errors=True)
    ratio = two / one if one else 0.0
    # One cluster synced (nearly) every host each interval: a second has nothing to add.
    saturated = one >= 0.95 * HOSTS
    label = f"{HOSTS:,} light hosts × {VMS} VMs (load {os.getloadavg()[0]:.1f})"
    # What one cluster's threads could sync if a sync cost no CPU: each waits LATENCY_MS a host.
    bound = THREADS * CAPACITY_INTERVAL * 1000 / LATENCY_MS
    return [
        (
            f"sync capacity, {label}, 1 task cluster",
            f"{one:.0f} hosts / {CAPACITY_INTERVAL:g} s interval (latency bound {bound:.0f})",
            "",
            "",
        ),
        (
            f"sync capacity, {label}, 2 task clusters",
            f"{two:.0f} hosts / {CAPACITY_INTERVAL:g} s interval ({ratio:.2f}×)"
            + (", one cluster synced them all: too few hosts to compare" if saturated else ""),
            "≥ 1.7× one cluster",
            "n/a" if saturated else "yes" if ratio >= 1.7 else "NO",
        ),
        (
            f"oldest last_seen_at, {label}, 2 task clusters, {interval:g} s interval",
            f"{oldest:.1f} s ({per_interval:.0f} hosts synced / interval)",
            f"≤ {2 * interval:g} s",
            "yes" if oldest <= 2 * interval else "NO",
        ),
        (
            f"oldest last_seen_at, {label}, 2 task clusters, {interval:g} s interval, "
            "one CPU busy with other work",
            f"{busy_oldest:.1f} s ({busy_per_interval:.0f} hosts synced / interval)",
            f"≤ {2 * interval:g} s",
            "yes" if busy_oldest <= 2 * interval else "NO",
        ),
    ]


@contextlib.contextmanager
def _other_work():
    """One CPU's worth of other work on the machine (a process that only computes), as a
    task cluster finds beside a web tier or a database under load."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        process.kill()
        process.wait()
