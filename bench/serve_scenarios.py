"""Allocation through a real web server: requests per second of ``POST .../allocatevm/`` beside
``GET /api/me/`` under the same concurrency, and beside the raw-SQL floor (the statements an
allocation cannot do without, run directly on the database).

``served_rates(base_url, ...)`` measures any server that serves the bench's database; the
scenario starts one (the web tier as `make serve` runs it: gunicorn supervising two uvicorn
workers, a pool of 20 database connections each; or ``BENCH_SERVE_COMMAND``, ``{port}``
replaced by a free port) and stops it afterwards.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from bench.fleet import make_pool, remove_pools
from hosts.models import Quota, VirtualMachine
from lab.childprocess import SERVE_ENV, asgi_command, child_env, free_port
from project.access import tokens as api_tokens
from project.access.grants import grant_role
from project.live.event_scopes import event_keys
from project.models import Role

User = get_user_model()
REPO = Path(__file__).resolve().parent.parent
CONCURRENCY = 8
REQUESTS = 400
SERVE_WORKERS = 2


def _rate(base_url: str, method: str, path: str, tokens: list[str], total: int) -> dict:
    """``total`` requests, ``len(tokens)`` at a time (one keep-alive connection and one user
    each): requests per second, p95 milliseconds and the status codes."""
    parts = urlsplit(base_url)
    left = iter(range(total))
    lock = threading.Lock()
    times: list[float] = []
    statuses: Counter = Counter()

    def worker(token: str) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        headers = {"Authorization": f"Token {token}", "Content-Length": "0"}
        try:
            while True:
                with lock:
                    if next(left, None) is None:
                        return
                start = time.perf_counter()
                conn.request(method, path, headers=headers)
                response = conn.getresponse()
                response.read()
                with lock:
                    times.append((time.perf_counter() - start) * 1000)
                    statuses[response.status] += 1
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(token,)) for token in tokens]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    p95 = statistics.quantiles(times, n=20, method="inclusive")[18]
    return {"per_s": total / seconds, "p95": p95, "statuses": dict(statuses), "requests": total}


def served_rates(
    base_url: str, pool_id: int, tokens: list[str], total: int = REQUESTS, rounds: int = 4
) -> dict:
    """``GET /api/me/`` and taking a VM from the pool, each ``total`` times at the concurrency
    of ``tokens`` (one user each, each allowed to take from the pool). The two alternate in
    ``rounds`` rounds, so a machine whose load drifts during the run weighs on both alike."""
    _rate(base_url, "GET", "/api/me/", tokens, len(tokens) * 4)  # warm every worker
    paths = {"me": ("GET", "/api/me/"), "allocate": ("POST", f"/api/vmpools/{pool_id}/allocatevm/")}
    runs: dict[str, list[dict]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, (method, path) in paths.items():
            runs[name].append(_rate(base_url, method, path, tokens, total // rounds))
    figures = {}
    for name, parts in runs.items():
        statuses: Counter = Counter()
        for part in parts:
            statuses.update(part["statuses"])
        seconds = sum(part["requests"] / part["per_s"] for part in parts)
        figures[name] = {
            "per_s": sum(part["requests"] for part in parts) / seconds,
            "p95": statistics.median(part["p95"] for part in parts),
            "statuses": dict(statuses),
        }
    return figures


# -- the raw-SQL floor ---------------------------------------------------------------------------


def floor_statements(vendor: str) -> list[str]:
    """What an allocation must do at the least, in SQL: lock the user, pick and lock a free
    running VM, assign it, grant it, say so in the feed."""
    lock = " FOR UPDATE" if vendor == "postgresql" else ""
    skip = " FOR UPDATE SKIP LOCKED" if vendor == "postgresql" else ""
    return [
        f"SELECT id FROM auth_user WHERE id = %(user)s{lock}",
        "SELECT id FROM hosts_virtualmachine WHERE pool_id = %(pool)s AND owner_id IS NULL"
        f" AND NOT admin_hold AND status = 'up' ORDER BY pool_index, id LIMIT 1{skip}",
        "UPDATE hosts_virtualmachine SET owner_id = %(user)s WHERE id = %(vm)s",
        "INSERT INTO guardian_userobjectpermission (permission_id, content_type_id, object_pk,"
        " user_id) VALUES (%(permission)s, %(content_type)s, %(vm_text)s, %(user)s)",
        "INSERT INTO project_event (kind, object_type, object_id, message, data, created_at,"
        " vm_id, pool_id, user_id, scope_keys) VALUES ('changed', 'vm', %(vm)s, 'given', '{}',"
        " %(now)s, %(vm)s, %(pool)s, %(user)s, %(scope_keys)s)",
    ]


def floor_rate(pool_id: int, user_ids: list[int], permission: tuple[int, int], total: int):
    """Allocations per second running ``floor_statements`` directly, one thread per user."""
    statements = floor_statements(connection.vendor)
    left = iter(range(total))
    lock = threading.Lock()

    failures: list[BaseException] = []
    # SQLite takes its one write lock up front, as Corral's own transactions do there: a
    # deferred BEGIN that reads, then writes, fails at once when another writer holds it.
    begin = "BEGIN" if connection.vendor == "postgresql" else "BEGIN IMMEDIATE"

    def worker(user_id: int) -> None:
        db = connections["default"]
        try:
            while True:
                with lock:
                    if next(left, None) is None:
                        return
                with db.cursor() as cursor:
                    cursor.execute(begin)
                    values = {"user": user_id, "pool": pool_id, "now": timezone.now()}
                    cursor.execute(statements[0], values)
                    cursor.execute(statements[1], values)
                    vm = cursor.fetchone()[0]
                    values.update(vm=vm, vm_text=str(vm))
                    keys = event_keys({"vm_id": vm, "pool_id": pool_id, "user_id": user_id})
                    values.update(scope_keys=json.dumps(keys))
                    values.update(permission=permission[0], content_type=permission[1])
                    for statement in statements[2:]:
                        cursor.execute(statement, values)
                    cursor.execute("COMMIT")
        except BaseException as exc:  # re-raised below: a failed floor is no figure
            failures.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=worker, args=(uid,)) for uid in user_ids]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError("the raw-SQL floor failed") from failures[0]
    return total / (time.perf_counter() - start), len(statements)


# -- the server ------------------------------------------------------------------------------------


@contextlib.contextmanager
def web_server(command: Callable[[int], list[str]] | None = None, **env: object):
    """A web server on the bench's database (DEBUG off, as deployed); yields its base URL.
    ``command``: the server's command line for a port (if not given, ``BENCH_SERVE_COMMAND``,
    else the tier of `make serve`, with its settings); ``env`` is set over the server's
    environment."""
    port = free_port()
    if command is not None:
        argv = command(port)
    elif "BENCH_SERVE_COMMAND" in os.environ:
        argv = shlex.split(os.environ["BENCH_SERVE_COMMAND"].replace("{port}", str(port)))
    else:
        argv = asgi_command(f"127.0.0.1:{port}", SERVE_WORKERS, share_port=True)
        env = {**SERVE_ENV, **env}
    environ = child_env(
        DJANGO_SETTINGS_MODULE="project.test_settings",
        ALLOWED_HOSTS="127.0.0.1",
        DEBUG="0",
        HOST="127.0.0.1",
        PORT=port,
        **env,
    )
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in the finally below)
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=environ,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"the web server exited: {log.read()[-2000:]!r}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=1),
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the web server did not listen within 60 s")
            time.sleep(0.2)
        yield base_url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


# -- the scenario -------------------------------------------------------------------------------


def _takers(pool, count: int) -> list:
    """``count`` users who may take from ``pool``, each with a quota that holds every VM the
    scenario hands out (the quota is checked, as for anyone, and never refuses)."""
    role = Role.objects.get(name="UserRole")
    users = []
    for n in range(count):
        user, _ = User.objects.get_or_create(username=f"servebench-{pool.pk}-{n}")
        grant_role(role, pool, user=user)
        Quota.objects.update_or_create(
            user=user, defaults=dict.fromkeys(("vms", "vcpus", "memory_mb", "disk_gb"), 10**6)
        )
        users.append(user)
    return users


def _queries(user, path: str, method: str = "get") -> int:
    client = APIClient()
    client.force_authenticate(user)
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as ctx:
        getattr(client, method)(path)
    return len(ctx.captured_queries)


def served_allocation(measure):
    """Taking a prestarted VM through a real web server, beside ``GET /api/me/`` and the
    raw-SQL floor, at CONCURRENCY requests at once."""
    size = REQUESTS + 50
    pool = make_pool(size, up=size, prestarted=size)
    floor_pool = make_pool(REQUESTS, up=REQUESTS)
    users = _takers(pool, CONCURRENCY)
    floor_users = _takers(floor_pool, CONCURRENCY)
    tokens = [api_tokens.issue(user)[1] for user in users]
    me_queries = _queries(users[0], "/api/me/")
    # The first hand-over queues the prestart monitor's nudge; the next, within its interval,
    # is what a run of hand-overs costs.
    first_queries = _queries(users[0], f"/api/vmpools/{pool.pk}/allocatevm/", "post")
    allocate_queries = _queries(users[0], f"/api/vmpools/{pool.pk}/allocatevm/", "post")
    with web_server() as base_url:
        rates = served_rates(base_url, pool.pk, tokens)
    content_type = ContentType.objects.get_for_model(VirtualMachine)
    permission = Permission.objects.get(content_type=content_type, codename="role_userrole")
    floor, floor_count = floor_rate(
        floor_pool.pk, [u.pk for u in floor_users], (permission.pk, content_type.pk), REQUESTS
    )
    remove_pools([pool, floor_pool])
    me, allocate = rates["me"], rates["allocate"]
    share = allocate["per_s"] / me["per_s"]
    server = "BENCH_SERVE_COMMAND" if "BENCH_SERVE_COMMAND" in os.environ else "make serve's tier"
    return [
        (
            f"GET /api/me/ via {server}, {CONCURRENCY} at once",
            f"{me['per_s']:.0f} req/s, p95 {me['p95']:.0f} ms, {me_queries} queries "
            f"(+1 token lookup) {me['statuses']}",
            "(reference)",
            "-",
        ),
        (
            f"allocate a prestarted VM via {server}, {CONCURRENCY} at once",
            f"{allocate['per_s']:.0f} req/s = {share:.0%} of /api/me/, p95 "
            f"{allocate['p95']:.0f} ms, {allocate_queries} queries ({first_queries} when it "
            f"queues the monitor's nudge; +1 token lookup) {allocate['statuses']}",
            ">= 50% of /api/me/",
            "yes" if share >= 0.5 and set(allocate["statuses"]) == {200} else "NO",
        ),
        (
            f"raw-SQL floor of an allocation, {CONCURRENCY} at once",
            f"{floor:.0f} allocations/s, {floor_count} statements; the API reaches "
            f"{allocate['per_s'] / floor:.0%} of it",
            "(reference)",
            "-",
        ),
    ]
