"""Remote hosts over SSH: what one task cluster spends per host it syncs, over libvirt's ``ssh``
transport (Corral's default: the ssh program, one client process per host) and over its
in-process ``libssh``.

    .venv/bin/python bench/run.py remote_hosts      # BENCH_FLEET_HOSTS=20 by default

Fleet hosts (lab/fleethosts.py: each in namespaces of its own, with sshd and the system
libvirtd; root only, else one row says it was skipped), the first running a light guest
(firmware only, no disk: a running domain in its reports), are registered as an admin adds a
KVM host: ``qemu+ssh://root@ADDRESS/system``, Corral's key, the host key trusted. One real task
cluster (``manage.py qcluster``, default settings: 4 workers, 4 sync threads, 5 s interval) is
started three times: with no host (the baseline), with the hosts over ``ssh``, and over
``libssh`` (their URIs naming ``known_hosts=``, a file of the trusted keys, and ``keyfile=``,
Corral's key). Each time, from two intervals after every host is Up, its process tree (the ssh
clients libvirt runs included) is read from /proc every second over three intervals:
processes, SSH connections and the processes holding them, RSS and PSS, open file descriptors,
CPU time; with the oldest ``last_seen_at``, hosts not Up, workers that died, and the workers
that held the cluster's sync heartbeat (from its start). Then ``bench/fleet_probe.py``, a
process of its own, times what a sync asks a host, beside its floor over the host's own
libvirt socket. A transport that fails or crashes is reported as its figure; the fleet and the
cluster are always taken down.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libvirt
from django.conf import settings
from django.utils import timezone

from bench.fleet import make_fleet
from hosts import sshtrust
from hosts.driver import uris
from hosts.driver.libvirt.connection import drop
from hosts.models import Cluster, Host, HostStatus
from hosts.sync import shard
from lab import fleethosts
from lab.childprocess import child_env, start_task_cluster
from project.models import LoopLock

HOSTS = int(os.environ.get("BENCH_FLEET_HOSTS", "20"))
ROOT = Path(__file__).resolve().parent.parent
TICK_S = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
UP_TIMEOUT_S = 90
PROBE_REPEAT = 3
PROBE_BUDGET_S = 40  # no host is started after it; libssh's reports take seconds each
PROBE_TIMEOUT_S = 150
# A running domain for the reports to carry: firmware with nothing to boot, idle.
LIGHT_GUEST = (
    "<domain type='qemu'><name>bench-idle</name><memory unit='MiB'>32</memory><vcpu>1</vcpu>"
    "<os><type arch='x86_64'>hvm</type></os><devices><serial type='pty'/></devices></domain>"
)


# -- the cluster's process tree, from /proc ---------------------------------------------------


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                found.setdefault(parent, []).append(int(entry.name))
    return found


def _tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    children, pids, index = _children(), [root], 0
    while index < len(pids):
        pids.extend(children.get(pids[index], []))
        index += 1
    return pids


def _ssh_sockets() -> set[str]:
    """The inodes of this machine's TCP connections to port 22 (the cluster's network)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[2].endswith(":0016") and fields[3] == "01":  # established
                    found.add(f"socket:[{fields[9]}]")
    return found


def _read(pid: int, ssh_sockets: set[str]) -> dict | None:
    """One process: its command and parent, RSS and PSS (kB), open fds, those that are SSH
    connections, and CPU ticks; None once gone."""
    proc = Path(f"/proc/{pid}")
    try:
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        pss = next(
            int(line.split()[1])
            for line in (proc / "smaps_rollup").read_text().splitlines()
            if line.startswith("Pss:")
        )
        fds = []
        for fd in os.listdir(proc / "fd"):
            with contextlib.suppress(OSError):
                fds.append(os.readlink(proc / "fd" / fd))
        return {
            "comm": (proc / "comm").read_text().strip(),
            "ppid": int(fields[1]),
            "rss_kb": int((proc / "statm").read_text().split()[1]) * PAGE_KB,
            "pss_kb": pss,
            "fds": len(fds),
            "ssh_connections": sum(link in ssh_sockets for link in fds),
            "ticks": int(fields[11]) + int(fields[12]),
        }
    except (OSError, StopIteration):
        return None


def _snapshot(root: int) -> dict[int, dict]:
    ssh_sockets = _ssh_sockets()
    return {pid: found for pid in _tree(root) if (found := _read(pid, ssh_sockets)) is not None}


def _totals(snapshot: dict[int, dict]) -> dict:
    values = snapshot.values()
    # A connection is held by the process that made it: itself (libssh), or the ssh client
    # it runs (ssh).
    holders = {
        p["ppid"] if p["comm"] == "ssh" else pid
        for pid, p in snapshot.items()
        if p["ssh_connections"]
    }
    return {
        "processes": len(snapshot),
        "connections": sum(p["ssh_connections"] for p in values),
        "holders": len(holders),
        "ssh": sum(p["comm"] == "ssh" for p in values),
        "rss_mb": sum(p["rss_kb"] for p in values) / 1024,
        "pss_mb": sum(p["pss_kb"] for p in values) / 1024,
        "fds": sum(p["fds"] for p in values),
        "most_fds": max((p["fds"] for p in values), default=0),
    }


# -- the task cluster -------------------------------------------------------------------------


def _start_cluster(log: Path) -> subprocess.Popen:
    """A task cluster with the default settings (the default sync interval), on the bench's
    database."""
    return start_task_cluster(log, CORRAL_SYNC_INTERVAL=settings.CORRAL_SYNC_INTERVAL)


def _stop_cluster(process: subprocess.Popen) -> None:
    """kill -9 the cluster and everything it started (the ssh clients libvirt ran with it)."""
    pids = _tree(process.pid)
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    # Its host leases and heartbeat expire before the next cluster starts.
    time.sleep(settings.CORRAL_SYNC_INTERVAL + 1)


def _all_up(started_at) -> bool:
    hosts = list(Host.objects.values_list("status", "last_seen_at"))
    return all(status == HostStatus.UP and seen and seen >= started_at for status, seen in hosts)


def _not_up() -> list[str]:
    return [
        f"{name} {status}: {detail[:160]}"
        for name, status, detail in Host.objects.exclude(status=HostStatus.UP).values_list(
            "name", "status", "status_detail"
        )
    ]


def _note_syncers(root: int, seen: set[int]) -> None:
    """Add the process of the cluster at ``root`` that holds its sync heartbeat now
    (``hosts.sync.shard``; a holder is ``member:pid:thread``)."""
    ours = set(_tree(root))
    for holder in LoopLock.objects.filter(name__startswith=shard.MEMBER).values_list(
        "holder", flat=True
    ):
        pid = int(holder.split(":")[1])
        if pid in ours:
            seen.add(pid)


def _phase(name: str, folder: Path, probe: list[tuple[int, str]] | None, bare_ssh: bool) -> dict:
    """Start a task cluster, wait for every host Up, read its tree over three intervals, run
    the probe; the figures (``failed`` says why when the hosts never came Up)."""
    interval = settings.CORRAL_SYNC_INTERVAL
    Host.objects.update(status=HostStatus.CONNECTING, status_detail="", last_seen_at=None)
    log = folder / f"qcluster-{name}.log"
    started_at, started = timezone.now(), time.monotonic()
    cluster = _start_cluster(log)
    result: dict = {}
    syncers: set[int] = set()
    try:
        while not _all_up(started_at):
            _note_syncers(cluster.pid, syncers)
            if time.monotonic() - started > UP_TIMEOUT_S or cluster.poll() is not None:
                result["failed"] = "; ".join(_not_up()[:3]) or "the task cluster ended"
                result["up_count"] = Host.objects.filter(status=HostStatus.UP).count()
                break
            time.sleep(0.5)
        else:
            result["up_s"] = time.monotonic() - started
        time.sleep(2 * interval if probe else 3 * interval)
        result.update(_watch(cluster.pid, 3 * interval, syncers))
        result["syncers"] = len(syncers)
        if probe:
            result["probe"] = _probe(folder / f"probe-{name}", probe, bare_ssh)
        result["deaths"] = _deaths(log)
    finally:
        _stop_cluster(cluster)
    return result


def _watch(root: int, window: float, syncers: set[int]) -> dict:
    """The tree's figures sampled every second over ``window`` (medians), its CPU over it, the
    oldest ``last_seen_at`` seen and the samples where a host was not Up."""
    samples, oldest, not_up = [], 0.0, 0
    first = _snapshot(root)
    began = time.monotonic()
    while time.monotonic() - began < window:
        time.sleep(1)
        last = _snapshot(root)
        samples.append(_totals(last))
        seen = list(Host.objects.values_list("last_seen_at", flat=True))
        if seen:
            stamps = [at for at in seen if at is not None]
            if len(stamps) < len(seen):
                oldest = float("inf")
            elif stamps:
                oldest = max(oldest, (timezone.now() - min(stamps)).total_seconds())
        not_up += Host.objects.exclude(status=HostStatus.UP).exists()
        _note_syncers(root, syncers)
    elapsed = time.monotonic() - began

    def ticks(only_ssh: bool) -> int:
        return sum(
            p["ticks"] - first.get(pid, {"ticks": 0})["ticks"]
            for pid, p in last.items()
            if not only_ssh or p["comm"] == "ssh"
        )

    figures = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    figures.update(
        cpu_pct=100 * ticks(False) / TICK_S / elapsed,
        ssh_cpu_pct=100 * ticks(True) / TICK_S / elapsed,
        oldest_seen_s=oldest,
        not_up_samples=not_up,
        samples=len(samples),
        load=os.getloadavg()[0],
    )
    return figures


def _deaths(log: Path) -> int:
    """Workers django-q2 had to start again (one that died: a crash in libvirt, say)."""
    return log.read_text(errors="replace").count("reincarnated")


def _probe(folder: Path, hosts: list[tuple[int, str]], bare_ssh: bool) -> dict:
    """Run bench/fleet_probe.py; its records, and how it ended."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "hosts": hosts,
        "repeat": PROBE_REPEAT,
        "threads": settings.CORRAL_SYNC_THREADS,
        "budget_s": PROBE_BUDGET_S,
        "bare_ssh": bare_ssh,
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    out = folder / "out.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.fleet_probe", str(folder / "spec.json"), str(out)],
        cwd=ROOT,
        env=child_env(DJANGO_SETTINGS_MODULE="project.test_settings"),
        stdout=open(folder / "probe.log", "ab"),  # noqa: SIM115 (the child's)
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        code = process.wait(timeout=PROBE_TIMEOUT_S)
        ended = "ok" if code == 0 else _exit_words(code)
    except subprocess.TimeoutExpired:
        for pid in reversed(_tree(process.pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
        ended = f"killed after {PROBE_TIMEOUT_S} s"
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return {"records": records, "ended": ended}


def _exit_words(code: int) -> str:
    if code < 0:
        return f"crashed ({signal.Signals(-code).name})"
    return f"exited {code}"


# -- the fleet --------------------------------------------------------------------------------


def _register(fleet: fleethosts.Fleet) -> list[Host]:
    """The fleet's hosts in one cluster, as an admin adds KVM hosts (as ``fleethosts up``
    does): reached with Corral's own key, each host key trusted."""
    cluster = Cluster.objects.get()
    return [
        Host.objects.create(
            name=host.name,
            cluster=cluster,
            uri=host.managed_uri,
            ssh_host_key=host.host_key,
            storage_path=host.pool_path,
        )
        for host in fleet.hosts
    ]


def _run_light_guest(host: fleethosts.FleetHost) -> None:
    """Start ``LIGHT_GUEST`` on the host (it goes with the host); a warning if it cannot."""
    try:
        conn = libvirt.open(host.uri)
        try:
            conn.createXML(LIGHT_GUEST, 0)
        finally:
            conn.close()
    except libvirt.libvirtError as exc:
        print(f"no light guest on {host.name}: {exc}", file=sys.stderr)


def _over_libssh(hosts: list[Host], folder: Path) -> None:
    """Every host's URI over libvirt's libssh transport, opened as written: a known-hosts file
    of the keys trusted for them, Corral's own key."""
    known_hosts = folder / "libssh_known_hosts"
    known_hosts.write_text(
        "".join(
            sshtrust.known_hosts_line(uris.ssh_target(host.uri), host.ssh_host_key)
            for host in hosts
        )
    )
    key = sshtrust.identity().private_key
    for host in hosts:
        uri = host.uri.replace("qemu+ssh://", "qemu+libssh://", 1)
        Host.objects.filter(pk=host.pk).update(
            uri=f"{uri}?keyfile={key}&known_hosts={known_hosts}&sshauth=privkey"
        )


def _floor_uri(host: fleethosts.FleetHost) -> str:
    """The host's libvirt daemon over its own socket: the same daemon, no SSH."""
    return f"qemu+unix:///system?socket={host.directory}/run/libvirt/libvirt-sock"


def remote_hosts(measure):
    reason = fleethosts.unavailable()
    if reason:
        return [("remote hosts over SSH", f"skipped: {reason}", "", "")]
    folder = Path(tempfile.mkdtemp(prefix="corral-fleet-bench-", dir="/tmp"))
    phases: dict[str, dict] = {}
    try:
        make_fleet(0, clusters=1)
        Host.objects.all().delete()  # the fleet's placeholder host has no daemon
        phases["baseline"] = _phase("baseline", folder, None, False)
        try:
            fleet = fleethosts.up(HOSTS, directory=folder / "fleet", owner=os.getpid())
        except fleethosts.FleetHostError as exc:
            return [("remote hosts over SSH", f"skipped: {exc}", "", "")]
        for host in fleet.hosts:
            drop(host.uri)  # the bench's own connections (made as the fleet came up)
        _run_light_guest(fleet.hosts[0])
        hosts = _register(fleet)
        probe = [(row.pk, _floor_uri(host)) for row, host in zip(hosts, fleet.hosts, strict=True)]
        phases["ssh"] = _phase("ssh", folder, probe, bare_ssh=True)
        _over_libssh(hosts, folder)
        phases["libssh"] = _phase("libssh", folder, probe, bare_ssh=False)
    finally:
        fleethosts.down(folder / "fleet")
        Host.objects.all().delete()
        print(f"task cluster logs and probe records in {folder}", file=sys.stderr)
    (folder / "figures.json").write_text(json.dumps(phases, indent=1, default=str))
    return _rows(phases)


# -- the table --------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _spread(values: list[float]) -> str:
    if not values:
        return "none"
    return f"{statistics.median(values):.1f} / {_pct(values, 0.95):.1f} ms"


def _tree_words(phase: dict) -> str:
    return (
        f"{phase['processes']:.0f} processes ({phase['ssh']:.0f} ssh), "
        f"{phase['connections']:.0f} SSH connections held by {phase['holders']:.0f} processes, "
        f"PSS {phase['pss_mb']:.0f} MB (RSS {phase['rss_mb']:.0f} MB), {phase['fds']:.0f} fds "
        f"(most in one process {phase['most_fds']:.0f}), CPU {phase['cpu_pct']:.1f}% of a core "
        f"(ssh clients {phase['ssh_cpu_pct']:.1f}%)"
    )


def _per_host(phase: dict, base: dict) -> str:
    def each(key: str) -> float:
        return (phase[key] - base[key]) / HOSTS

    return (
        f"+{each('connections'):.2f} SSH connections, "
        f"+{each('processes'):.2f} processes, +{each('pss_mb'):.2f} MB PSS "
        f"(+{each('rss_mb'):.2f} MB RSS), +{each('fds'):.2f} fds "
        f"(+{each('most_fds'):.2f} in the process with the most), "
        f"+{each('cpu_pct'):.2f}% of a core"
    )


def _transport_rows(transport: str, phase: dict, base: dict) -> list[tuple]:
    label = f"{HOSTS} fleet hosts over {transport} (load {phase.get('load', 0):.1f})"
    if "processes" not in phase:
        return [(f"task cluster, {label}", f"FAILED: {phase.get('failed')}", "", "")]
    up = (
        f"all Up {phase['up_s']:.1f} s after the start"
        if "up_s" in phase
        else f"{phase['up_count']} of {HOSTS} Up after {UP_TIMEOUT_S} s: {phase['failed']}"
    )
    rows = [
        (f"task cluster, {label}", _tree_words(phase), "(reference)", ""),
        (f"per remote host over {transport}", _per_host(phase, base), "(reference)", ""),
        (
            f"sync lag over {transport}: oldest last_seen_at, hosts not Up, workers died",
            f"{phase['oldest_seen_s']:.1f} s; not Up in {phase['not_up_samples']} of "
            f"{phase['samples']} samples; {phase['deaths']} died; {up}; the sync heartbeat "
            f"held by {phase['syncers']} worker processes in turn",
            f"≤ {2 * settings.CORRAL_SYNC_INTERVAL:g} s, 0, 0",
            "yes"
            if phase["oldest_seen_s"] <= 2 * settings.CORRAL_SYNC_INTERVAL
            and not phase["not_up_samples"]
            and not phase["deaths"]
            else "NO",
        ),
    ]
    probe = phase.get("probe")
    if probe is None:
        return rows
    records = probe["records"]
    timed = [r for r in records if "error" not in r]

    def joined(key: str) -> list[float]:
        return [value for r in timed for value in r.get(key, [])]

    errors = sorted({r["error"][:200] for r in records if "error" in r})
    opened = [r["open_ms"] for r in records if "open_ms" in r]
    bare = [r["bare_ssh_ms"] for r in timed if "bare_ssh_ms" in r]
    connect = f"connect {statistics.median(opened):.0f} ms" if opened else "no connection"
    if bare:
        connect += f" (bare ssh login {statistics.median(bare):.0f} ms)"
    ended = "" if probe["ended"] == "ok" else f"; the probe {probe['ended']}"
    failed = f"; {len(errors)} kinds of failure: {' | '.join(errors)}" if errors else ""
    rows += [
        (
            f"host report over {transport}, median / p95 ({len(timed)} hosts × {PROBE_REPEAT})",
            f"{_spread(joined('report_ms'))} (floor, the host's local socket: "
            f"{_spread(joined('floor_report_ms'))}){ended}{failed}",
            "(reference)",
            "",
        ),
        (
            f"sync of one host over {transport} (report + database), median / p95",
            f"{_spread(joined('sync_ms'))}",
            f"≤ {settings.CORRAL_SYNC_INTERVAL:g} s",
            "yes"
            if timed and _pct(joined("sync_ms"), 0.95) <= settings.CORRAL_SYNC_INTERVAL * 1000
            else "NO",
        ),
        (
            f"round trip over {transport} (getLibVersion), median / p95",
            f"{_spread(joined('rtt_ms'))} (floor {_spread(joined('floor_rtt_ms'))}); {connect}",
            "(reference)",
            "",
        ),
    ]
    return rows


def _rows(phases: dict) -> list[tuple]:
    base = phases["baseline"]
    rows = [
        (
            f"task cluster, no remote host (baseline, load {base.get('load', 0):.1f})",
            _tree_words(base),
            "(reference)",
            "",
        )
    ]
    for transport in ("ssh", "libssh"):
        rows += _transport_rows(transport, phases[transport], base)
    return rows
