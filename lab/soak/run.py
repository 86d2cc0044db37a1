"""The soak (``make soak``): Corral as production runs it, on this machine, used by many people
through its API for SOAK_MINUTES while its processes, hosts and database fail; then the fleet
settles and what must hold is checked. The report is printed and written as JSON under
var/soak/; the exit status is 1 if any invariant was broken.

Settings (environment):
    SOAK_MINUTES      how long users and faults run (10)
    SOAK_USERS        API users, a few of them admins (200)
    SOAK_FAULT_EVERY  mean seconds between faults (20)
    SOAK_THINK        mean seconds a user waits between two actions (20)
    SOAK_POLLERS      users who keep a long poll of the event feed open (a tenth of them)
    SOAK_LIGHT_HOSTS  light simulated hosts, besides 4 libvirt test-driver hosts (12)
    SOAK_SEED         the random choices (users' and faults'), for a run to be repeated
    SOAK_REPORT_DIR   where the JSON report goes (var/soak/)
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import requests

from lab.soak.services import REPO, Postgres, Redis, SoakError, TaskCluster, WebTier

# What each task cluster is told: the production defaults, but a faster reaper and takeover,
# so that a killed cluster's work is taken over within the figure the soak checks (15 s).
CLUSTER_ENV = {
    "Q_WORKERS": "3",
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "10",
}
READY_S = 180


def _setting(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    try:
        number = float(value) if value else default
    except ValueError:
        raise SystemExit(f"{name} must be a number (got {value!r})") from None
    if number <= 0:
        raise SystemExit(f"{name} must be above 0 (got {value!r})")
    return number


class Soak:
    """Everything the run started, for the faults and the checks."""

    def __init__(self, base: Path):
        self.base = base
        self.postgres: Postgres | None = None
        self.redis: Redis | None = None
        self.web: WebTier | None = None
        self.clusters: list[TaskCluster] = []
        self.fleet = None
        self.record = None
        self.probe_token = ""
        self.closed = False  # stop() began: nothing is started again

    def api_answers(self) -> bool:
        """Whether the API answers a signed-in request (its database reached) now."""
        try:
            response = requests.get(
                f"{self.web.url}/api/me/",
                headers={"Authorization": f"Token {self.probe_token}"},
                timeout=5,
            )
        except requests.RequestException:
            return False
        return response.status_code == 200

    def stop(self) -> None:
        """Stop everything at once: the run is over, nothing needs a graceful end."""
        self.closed = True
        for child in [self.web, *self.clusters]:
            if child is not None:
                with contextlib.suppress(Exception):
                    child.kill()
        if self.fleet is not None:
            from lab import simhosts

            for daemon in self.fleet.daemons:
                with contextlib.suppress(Exception):
                    simhosts.stop(daemon)
            with contextlib.suppress(Exception):
                simhosts.stop_light(self.fleet.light)
        if self.redis is not None:
            self.redis.stop()
        if self.postgres is not None:
            self.postgres.stop()


def main() -> int:
    minutes = _setting("SOAK_MINUTES", 10)
    users = int(_setting("SOAK_USERS", 200))
    every = _setting("SOAK_FAULT_EVERY", 20)
    think = _setting("SOAK_THINK", 20)
    pollers = int(_setting("SOAK_POLLERS", max(2, users // 10)))
    light_hosts = int(_setting("SOAK_LIGHT_HOSTS", 12))
    seed = int(os.environ.get("SOAK_SEED") or random.randrange(10**6))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    # Under /tmp: the hosts' daemons and PostgreSQL run as other users, who must reach it.
    base = Path(tempfile.mkdtemp(prefix=f"corral-soak-{stamp}-", dir="/tmp"))
    base.chmod(0o755)
    soak = Soak(base)
    # Stopped (Ctrl-C, or SIGTERM from a CI's timeout): everything it started stops too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(
        f"Soak: {minutes:g} min, {users} users, a fault every {every:g} s on average, "
        f"seed {seed}; processes and logs in {base}",
        flush=True,
    )
    try:
        report = _run(soak, minutes, users, every, think, pollers, light_hosts, seed)
    except SoakError as exc:
        print(f"The soak could not run: {exc}", file=sys.stderr)
        return 2
    finally:
        soak.stop()
    out = Path(os.environ.get("SOAK_REPORT_DIR") or REPO / "var" / "soak")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stamp}.json"
    report["logs"] = str(base)
    path.write_text(json.dumps(report, indent=2))
    from lab.soak.report import text

    print(text(report), flush=True)
    print(f"Report: {path}", flush=True)
    if not report["violations"]:
        shutil.rmtree(base, ignore_errors=True)
        return 0
    print(f"Logs of the processes kept in {base}", flush=True)
    return 1


def _run(soak, minutes, users, every, think, pollers, light_hosts, seed) -> dict:
    base = soak.base
    soak.postgres = Postgres(base / "pg").start()
    soak.postgres.create_database("corral")
    soak.redis = Redis(base).start()
    os.environ.update(
        DJANGO_SETTINGS_MODULE="lab.soak.settings",
        DATABASE_URL=soak.postgres.url("corral"),
        REDIS_URL=soak.redis.url,
        Q_CLUSTER_NAME="corral-soak",
        SECRET_KEY=secrets.token_urlsafe(40),
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_COOKIES="0",
        CORRAL_SIMHOSTS_DIR=str(base / "hosts"),
        STATIC_ROOT=str(base / "static"),
        LOG_LEVEL="WARNING",
    )
    os.environ.pop("SQLITE_PATH", None)
    import django

    django.setup()
    from django.core.management import call_command

    from lab.soak import invariants, load, world
    from lab.soak.faults import Faults
    from lab.soak.report import build

    call_command("migrate", verbosity=0)
    (base / "hosts").mkdir(mode=0o755)
    soak.fleet = world.build(base / "hosts", users, light_hosts)
    soak.probe_token = next(iter(soak.fleet.admins.values()))
    # The soak's own connections are not kept between its checks (the server restarts).
    env = dict(os.environ)
    soak.web = WebTier({**env, "CORRAL_DB_POOL_SIZE": "20"}, base / "web.log").start()
    soak.clusters = [
        TaskCluster({**env, **CLUSTER_ENV}, base / f"qcluster-{n}.log").start() for n in (1, 2)
    ]
    print(f"Web tier on {soak.web.url}; waiting for the pools to be prestarted", flush=True)
    _wait_ready(soak)
    record = soak.record = load.Record(time.monotonic())
    stop_users, stop_faults, stop_watch = threading.Event(), threading.Event(), threading.Event()
    crowd, readers = load.people(soak.web.url, soak.fleet, record, stop_users, seed, think, pollers)
    watcher = invariants.Watcher(record, stop_watch)
    faults = Faults(soak, every, seed, stop_faults)
    for thread in [*crowd, watcher, faults]:
        thread.start()
    began = time.monotonic()
    ends = began + minutes * 60
    while time.monotonic() < ends:
        time.sleep(min(60, max(0.1, ends - time.monotonic())))
        print(
            f"  {(time.monotonic() - began) / 60:5.1f} min: {len(record.calls)} calls, "
            f"{len(faults.log)} faults, {len(record.violations)} violations",
            flush=True,
        )
    stop_faults.set()
    faults.join()
    faults.wait()
    # Whatever a fault left stopped is running again before the fleet settles.
    for cluster in soak.clusters:
        if not cluster.running():
            cluster.start()
    stop_users.set()
    for person in crowd:
        person.join(timeout=90)
    calls_end = time.monotonic()
    print("Users and faults stopped; waiting for the fleet to settle", flush=True)
    settle = invariants.settled(record, readers)
    stop_watch.set()
    watcher.join(timeout=30)
    return build(
        record=record,
        faults=faults.log,
        began=began,
        ended=calls_end,
        settle=settle,
        settings={
            "minutes": minutes,
            "users": users,
            "fault_every_s": every,
            "think_s": think,
            "pollers": pollers,
            "light_hosts": light_hosts,
            "seed": seed,
        },
        samples=watcher.samples,
    )


def _wait_ready(soak) -> None:
    from lab.soak.faults import db
    from lab.soak.invariants import pools_short

    deadline = time.monotonic() + READY_S
    while True:
        short = db(pools_short, ["the database cannot be reached"])
        if not short and soak.api_answers():
            return
        if time.monotonic() > deadline:
            raise SoakError(f"the fleet was not ready within {READY_S} s: {short}")
        for child in [soak.web, *soak.clusters]:
            if not child.running():
                raise SoakError(f"the {child.name} exited: {child.log.read_text()[-2000:]}")
        time.sleep(1)
