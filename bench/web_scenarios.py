"""The web tier under open pages, as `make serve` runs it (gunicorn supervising WEB_WORKERS
uvicorn workers, a pool of 20 database connections each), on the benchmark database.

50 ordinary users; one allocation-and-return a second (its events reach 5 of them); GET
/api/me/ asked at a fixed rate. Measured in one run, each against the same idle p95:
- 500 open pages per web process as browser event streams, as scripts' long polls, and half
  of each: the p95, requests timed out, pages open or answered, and how long one event takes
  to reach every reader entitled to it;
- a reconnect storm: with the mix open, the web tier is replaced as a deploy replaces it (a new
  tier started beside the old one on the same port, the old one stopped) and every page
  reconnects, resuming from its last event id or token; the same figures over the 10 s from the
  old tier's stop, how long after it every reader had the event emitted during the deploy, and
  whether any reader missed an event;
- capacity: how many open pages one process holds before the p95 doubles, beside the same
  figure for a minimal asyncio server answering from memory (bench/web_floor.py), the floor.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q
from django.test import Client

from bench.fleet import make_pool, remove_pools
from hosts.models import Job, VirtualMachine
from lab.childprocess import SERVE_ENV, asgi_command, child_env, free_port
from project import events
from project.access import tokens as api_tokens
from project.access.grants import grant_role
from project.models import Event, EventKind, Role

User = get_user_model()
REPO = Path(__file__).resolve().parent.parent
USERS = 50
PAGES_PER_PROCESS = 500
PROBE_RATE = 60  # GET /api/me/ a second
PROBE_S = 20
POLL_TIMEOUT = 25
REQUEST_TIMEOUT_S = 10
MARKERS = 3
MARKER_GAP_S = 5
STORM_WINDOW_S = 10
PROBER_START_S = 2  # a prober process starts this much ahead of its first request
CAPACITY_STEPS = (250, 500, 1000, 2000, 3000, 4000, 6000)
CAPACITY_OPEN_S = 10
CAPACITY_PROBE_S = 10


def _log_path(name: str) -> Path:
    path = REPO / "var" / f"bench-{name}-{connection.vendor}.log"
    path.parent.mkdir(exist_ok=True)
    return path


class Server:
    """The ASGI web tier of `make serve` (or another command) in its own process group."""

    def __init__(self, workers: int, command: list[str] | None = None, port=None, **env):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = child_env(
            DJANGO_SETTINGS_MODULE="project.test_settings",
            DEBUG="0",
            ALLOWED_HOSTS="127.0.0.1",
            **{**SERVE_ENV, **env},
        )
        self.workers = workers
        self.command = command or [
            *asgi_command(f"127.0.0.1:{self.port}", workers, share_port=True),
            *("--graceful-timeout", "10", "--log-level", "info"),
        ]
        self.start()

    def start(self) -> None:
        """Start it on its port and return once all its workers serve (a port shared with
        another tier, as a deploy shares it, answers from either until then)."""
        self.log = _log_path(f"web-server-{self.port}-{time.monotonic_ns()}")
        with open(self.log, "wb") as log:  # the server's own log
            self.process = subprocess.Popen(
                self.command,
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 90
        while self.log.read_text(errors="replace").count("Application startup complete") < (
            self.workers
        ):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"the web server did not start: {self.log}")
            time.sleep(0.1)
        self.wait_ready()

    def wait_ready(self, path: str = "/api/me/") -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                requests.get(f"{self.url}{path}", timeout=2)
                return
            except requests.RequestException:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the web server did not answer {path} within 60 s: {self.log}")

    def stop(self) -> None:
        if self.process.poll() is not None:
            return  # stopped already (a start that failed stops it before raising)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class Load:
    """One client process of bench/web_load.py; ``result()`` waits for its answer."""

    def __init__(self, spec: dict):
        self.folder = Path(tempfile.mkdtemp(prefix="corral-load-"))
        (self.folder / "spec.json").write_text(json.dumps(spec))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.web_load", "spec.json", "out.json"],
            cwd=self.folder,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    def stop(self) -> dict:
        """Tell it to end now (a process holding pages); its result."""
        (self.folder / "stop").touch()
        return self.result()

    def result(self) -> dict:
        if self.process.wait() != 0:
            raise RuntimeError("a load process failed")
        try:
            return json.loads((self.folder / "out.json").read_text())
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


class Crowd:
    """The users, their credentials and the background work of every scenario."""

    def __init__(self):
        self.pool = make_pool(40, up=40, prestarted=40)
        # The VM every user may see, outside the pool: the churn's events reach only the 5
        # users who take and return VMs (and the markers, about this VM, every user).
        template = self.pool.template
        self.shared = VirtualMachine.objects.create(
            name=f"{self.pool.name}-shared",
            cluster=self.pool.cluster,
            template=template,
            vcpus=template.vcpus,
            memory_mb=template.memory_mb,
            disk_gb=template.disk_gb,
        )
        user_role = Role.objects.get(name="UserRole")
        self.users = []
        for n in range(USERS):
            user, _ = User.objects.get_or_create(username=f"webbench-{n}")
            grant_role(user_role, self.pool, user=user)
            grant_role(user_role, self.shared, user=user)
            self.users.append(user)
        self.tokens = [api_tokens.issue(user)[1] for user in self.users]
        self.cookies = []
        for user in self.users:
            client = Client()
            client.force_login(user)
            self.cookies.append(client.cookies[settings.SESSION_COOKIE_NAME].value)
        self.markers: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pages(self, count: int, kinds: tuple[str, ...]) -> list[dict]:
        """``count`` pages of the 50 users in turn, of ``kinds`` in turn, from the latest event."""
        start = events.latest_token()
        return [
            {
                "kind": kinds[n % len(kinds)],
                "credential": (self.cookies if kinds[n % len(kinds)] == "sse" else self.tokens)[
                    n % USERS
                ],
                "user": n % USERS,
                "position": start,
            }
            for n in range(count)
        ]

    def emit_marker(self) -> str:
        """An event every user may see (about the VM all of them share); its message."""
        message = f"marker {len(self.markers)} {time.monotonic()}"
        self.markers[message] = time.monotonic()
        events.emit(EventKind.CHANGED, "vm", self.shared.pk, message, vm_id=self.shared.pk)
        connection.close()
        return message

    def churn(self, url: str) -> None:
        """One allocation-and-return a second, by the first 5 users in turn, until stopped."""

        def run() -> None:
            n = 0
            session = requests.Session()
            while not self._stop.wait(1.0):
                headers = {"Authorization": f"Token {self.tokens[n % 5]}"}
                n += 1
                try:
                    taken = session.post(
                        f"{url}/api/vmpools/{self.pool.pk}/allocatevm/", headers=headers, timeout=10
                    )
                    if taken.status_code == 200:
                        vm = taken.json()["vm"]["id"]
                        session.post(f"{url}/api/vms/{vm}/return/", headers=headers, timeout=10)
                        # No task cluster runs here: the VM is made free again at once.
                        Job.objects.filter(vm_id=vm).delete()
                        VirtualMachine.objects.filter(pk=vm).update(owner=None)
                except requests.RequestException:
                    pass  # a reload in progress: the next second tries again
            connection.close()

        self._stop.clear()
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop_churn(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(15)
        VirtualMachine.objects.filter(pool=self.pool).update(owner=None)

    def remove(self) -> None:
        self.shared.delete()
        remove_pools([self.pool])


def _probe(url: str, tokens: list[str], start: float, until: float) -> Load:
    """A prober (started ahead of ``start``: a process takes a while to start, and one that
    starts late sends its first second of requests in one burst)."""
    return Load(
        {
            "run": "prober",
            "url": url,
            "tokens": tokens,
            "rate": PROBE_RATE,
            "start": start,
            "until": until,
            "request_timeout": REQUEST_TIMEOUT_S,
            "stop_file": "stop",
        }
    )


def _probe_figures(samples: list) -> dict:
    answered = [ms for _, ms, status in samples if status == 200]
    return {
        "p95": _p95(answered) if len(answered) > 1 else float("inf"),
        "timed_out": sum(1 for _, _, status in samples if status == 0),
        "failed": sum(1 for _, _, status in samples if status not in (0, 200)),
        "sent": len(samples),
    }


def _idle_p95(url: str, crowd: Crowd) -> float:
    start = time.monotonic() + PROBER_START_S
    figures = _probe_figures(_probe(url, crowd.tokens, start, start + PROBE_S).result()["samples"])
    return figures["p95"]


def _fan_out(crowd: Crowd, pages: list[dict], marker: str) -> float:
    """Seconds from the marker's emission to its arrival at the last page (inf: some missed)."""
    arrivals = [page["markers"].get(marker) for page in pages]
    if any(arrival is None for arrival in arrivals):
        return float("inf")
    return max(arrivals) - crowd.markers[marker]


def _missed(crowd: Crowd, specs: list[dict], pages: list[dict]) -> int:
    """Events a page was entitled to, between where it started and where it ended, that it
    never received (a page told to resync is excused). Counted over the events every user is
    entitled to throughout (about the user, or the VM they all share): the churn's grants on
    the VMs it hands out come and go, and with them what else a user may see."""
    missed = 0
    for spec, page in zip(specs, pages, strict=True):
        if page["resyncs"]:
            continue
        user = crowd.users[spec["user"]]
        end = page["position"] or spec["position"]
        got = set(page["received"])
        entitled = Event.objects.filter(id__gt=spec["position"], id__lte=end).filter(
            Q(user_id=user.pk) | Q(vm_id=crowd.shared.pk)
        )
        missed += sum(1 for pk in entitled.values_list("id", flat=True) if pk not in got)
    return missed


def _open_pages(server: Server, crowd: Crowd, count: int, kinds: tuple[str, ...], *, storm=False):
    """Open ``count`` pages of ``kinds``, probe GET /api/me/ for PROBE_S under the steady load,
    then go on probing while MARKERS events reach every page, MARKER_GAP_S apart.

    A storm: with the pages open, the web tier is replaced as a deploy replaces it (the new
    tier started beside the old one on the same port, an event, the old one stopped). Every
    page of the old tier comes back on its own (a browser after its retry delay, a script at
    once) to the new one, which has none of their events in memory yet, and resumes from its
    last event id or token; the steady window is the STORM_WINDOW_S from the old tier's stop,
    with one more event half-way. The figures."""
    specs = crowd.pages(count, kinds)
    # Opened over one stream's length (or poll's timeout), as pages and scripts start at any
    # time: their reconnections and re-polls then come evenly, not all at once.
    open_over = max(settings.CORRAL_EVENT_STREAM_SECONDS, POLL_TIMEOUT)
    settled = time.monotonic() + open_over + 3.0
    window = STORM_WINDOW_S if storm else PROBE_S
    pages = Load(
        {
            "run": "pages",
            "url": server.url,
            "cookie_name": settings.SESSION_COOKIE_NAME,
            "pages": specs,
            "poll_timeout": POLL_TIMEOUT,
            "open_over_s": open_over,
            "until": time.monotonic() + 3600,
            "stop_file": "stop",  # in the load process's folder (Load.stop)
        }
    )
    prober = _probe(server.url, crowd.tokens, settled, settled + 3600)
    old = None
    try:
        time.sleep(max(0.0, settled - time.monotonic()))
        markers, caught_up = [], None
        if storm:  # a deploy: the new tier started beside the old one, then the old one stopped
            old = server.process
            server.start()
            deploy_marker = crowd.emit_marker()
            stopped = time.monotonic()
            os.killpg(old.pid, signal.SIGTERM)
            old.wait(30)
        probe_start = time.monotonic()  # what was asked before (a storm's deploy) is not counted
        steady_until = probe_start + window
        probe_until = steady_until + MARKERS * MARKER_GAP_S
        if storm:  # one event while the pages reconnect: every reader must get it
            time.sleep(max(0.0, probe_start + window / 2 - time.monotonic()))
            markers.append(crowd.emit_marker())
        for n in range(MARKERS):
            time.sleep(max(0.0, steady_until + n * MARKER_GAP_S + 0.5 - time.monotonic()))
            markers.append(crowd.emit_marker())
        time.sleep(max(0.0, probe_until - time.monotonic()))
        samples = [sample for sample in prober.stop()["samples"] if sample[0] >= probe_start]
        time.sleep(3)  # the last marker's slowest readers
        pages_out = pages.stop()["pages"]
    except BaseException:
        # Nothing the scenario started outlives it: the load, the prober, an old tier.
        for process in (pages, prober):
            with contextlib.suppress(Exception):
                process.stop()
        if old is not None and old.poll() is None:
            os.killpg(old.pid, signal.SIGKILL)
        raise
    if storm:  # every reader of the old tier has it once it has come back and resumed
        caught_up = _fan_out(crowd, pages_out, deploy_marker) - (
            stopped - crowd.markers[deploy_marker]
        )
    return {
        "caught_up": caught_up,
        **_probe_figures([sample for sample in samples if sample[0] < steady_until]),
        "during_fan_out": _probe_figures(
            [sample for sample in samples if sample[0] >= steady_until]
        ),
        "fan_out": max(_fan_out(crowd, pages_out, marker) for marker in markers),
        "working": sum(1 for page in pages_out if page["answers"] > 0),
        "pages": len(pages_out),
        "refused": sum(sum(page["refusals"].values()) for page in pages_out),
        "missed": _missed(crowd, specs, pages_out),
        "answers": sum(page["answers"] for page in pages_out),
    }


def _row(label: str, figures: dict, idles: tuple[float, float]) -> list[tuple]:
    idle = statistics.mean(idles)
    ratio = figures["p95"] / idle
    caught_up = figures["caught_up"]
    storm_rows = (
        []
        if caught_up is None
        else [
            (
                f"every reader has the event emitted during the deploy, {label}",
                f"{caught_up:.2f} s after the old tier's stop",
                f"<= {STORM_WINDOW_S} s",
                "yes" if caught_up <= STORM_WINDOW_S else "NO",
            )
        ]
    )
    ok_p95 = ratio <= 2 and figures["timed_out"] == 0 and figures["failed"] == 0
    ok_pages = figures["working"] == figures["pages"] and figures["missed"] == 0
    return [
        (
            f"GET /api/me/ p95, {label}",
            f"{figures['p95']:.1f} vs {idle:.1f} ms idle ({ratio:.2f}x; idle before the load "
            f"{idles[0]:.1f}, after {idles[1]:.1f}), "
            f"{figures['timed_out']} of {figures['sent']} timed out",
            "<= 2x, none timed out",
            "yes" if ok_p95 else "NO",
        ),
        (
            f"pages working and one event to every reader, {label}",
            f"{figures['working']}/{figures['pages']} open or answered, "
            f"{figures['fan_out']:.2f} s, {figures['missed']} events missed "
            f"({figures['answers']} answers or streams; GET /api/me/ p95 "
            f"{figures['during_fan_out']['p95']:.0f} ms while events reached every page, "
            f"{figures['during_fan_out']['timed_out']} timed out)",
            "all, <= 2 s, none missed",
            "yes" if ok_pages and figures["fan_out"] <= 2 else "NO",
        ),
        *storm_rows,
    ]


def _capacity(server: Server, crowd: Crowd) -> tuple[int, float, list[tuple[int, float]]]:
    """The most open pages (half streams, half long polls) one process held with GET /api/me/
    p95 within 2x its idle, adding CAPACITY_STEPS in turn; the idle p95 and every step's."""
    idle = _idle_p95(server.url, crowd)
    held, steps, loads = 0, [], []
    until = time.monotonic() + len(CAPACITY_STEPS) * (CAPACITY_OPEN_S + CAPACITY_PROBE_S) + 30
    opened = 0
    try:
        for step in CAPACITY_STEPS:
            more = crowd.pages(step - opened, ("sse", "poll"))
            opened = step
            loads.append(
                Load(
                    {
                        "run": "pages",
                        "url": server.url,
                        "cookie_name": settings.SESSION_COOKIE_NAME,
                        "pages": more,
                        "poll_timeout": POLL_TIMEOUT,
                        "open_over_s": CAPACITY_OPEN_S / 2,
                        "until": until,
                    }
                )
            )
            start = time.monotonic() + CAPACITY_OPEN_S
            prober = _probe(server.url, crowd.tokens, start, start + CAPACITY_PROBE_S)
            samples = prober.result()
            figures = _probe_figures(samples["samples"])
            steps.append((step, figures["p95"]))
            if figures["p95"] > 2 * idle or figures["timed_out"] or figures["failed"]:
                break
            held = step
    finally:
        for load in loads:
            load.process.kill()
            load.process.wait()
    return held, idle, steps


def open_pages(measure):
    """500 open pages per web process of each kind, and a reconnect storm (see the module)."""
    workers = int(os.environ.get("WEB_WORKERS", "2"))
    count = PAGES_PER_PROCESS * workers
    crowd = Crowd()
    rows = []
    server = Server(workers)
    try:
        crowd.churn(server.url)
        _idle_p95(server.url, crowd)  # warm the workers
        idle_before = _idle_p95(server.url, crowd)
        where = f"{count} pages on {workers} processes"
        figures = [
            (f"{where}, event streams", _open_pages(server, crowd, count, ("sse",))),
            (f"{where}, long polls", _open_pages(server, crowd, count, ("poll",))),
            (f"{where}, half of each", _open_pages(server, crowd, count, ("sse", "poll"))),
            (
                f"deploy storm, {where} half of each, the {STORM_WINDOW_S} s from the old "
                "tier's stop",
                _open_pages(server, crowd, count, ("sse", "poll"), storm=True),
            ),
        ]
        # Idle before and after the load, averaged: the machine's own drift counts for neither.
        idles = (idle_before, _idle_p95(server.url, crowd))
        for label, found in figures:
            rows += _row(label, found, idles)
    finally:
        crowd.stop_churn()
        server.stop()
    try:
        rows.append(_capacity_row(crowd))
    finally:
        crowd.remove()
    return rows


def _capacity_row(crowd: Crowd) -> tuple:
    # Corral's limits raised: this measures what one process holds, which they are set from.
    corral = Server(1, CORRAL_LIVE_WAITS_PER_USER="100000", CORRAL_LIVE_WAITS_PER_PROCESS="100000")
    try:
        held, idle, steps = _capacity(corral, crowd)
    finally:
        corral.stop()
    port = free_port()
    floor = Server(
        1,
        command=[
            *(sys.executable, "-m", "gunicorn", "bench.web_floor:app"),
            *("--worker-class", "uvicorn_worker.UvicornWorker", "--workers", "1"),
            *("--bind", f"127.0.0.1:{port}", "--log-level", "info"),
        ],
        port=port,
    )
    try:
        floor_held, floor_idle, floor_steps = _capacity(floor, crowd)
    finally:
        floor.stop()
    seen = ", ".join(f"{n}: {p95:.0f} ms" for n, p95 in steps)
    floor_seen = ", ".join(f"{n}: {p95:.0f} ms" for n, p95 in floor_steps)
    return (
        "open pages one web process holds, GET /api/me/ p95 <= 2x idle (capacity)",
        f"{held} (idle {idle:.0f} ms; {seen}); floor, asyncio from memory: {floor_held} "
        f"(idle {floor_idle:.0f} ms; {floor_seen})",
        ">= 500",
        "yes" if held >= 500 else "NO",
    )
