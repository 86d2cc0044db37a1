"""The web tier under open pages: 500 event streams from 50 non-superusers held open against
the ASGI server of `make serve` (gunicorn, uvicorn workers, WEB_WORKERS processes), on the
benchmark database.

Measured idle and loaded within one run: the p95 of GET /api/me/, allocation throughput through
POST /api/vmpools/{id}/allocatevm/, and how long one event takes to reach every stream
entitled to it.
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

from bench.pool_scenarios import _pool, _remove
from bench.scenarios import ALL
from hosts.models import VirtualMachine
from project import events
from project.childprocess import asgi_command, child_env, free_port
from project.grants import grant_role
from project.models import EventKind, Role

User = get_user_model()
REPO = Path(__file__).resolve().parent.parent
USERS = 50
STREAMS = 500
API_SAMPLES = 300
ALLOCATIONS = 150
CONCURRENCY = 4


def _start_server(workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = child_env(
        DJANGO_SETTINGS_MODULE="project.test_settings",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
        CORRAL_DB_POOL_SIZE="20",  # as `make serve`
    )
    command = [
        *asgi_command(f"127.0.0.1:{port}", workers),
        *("--graceful-timeout", "3", "--log-level", "warning"),
    ]
    log_path = REPO / "var" / f"bench-web-server-{connection.vendor}.log"
    log_path.parent.mkdir(exist_ok=True)
    with open(log_path, "wb") as log:  # the server's own log, not the table's
        server = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.get(f"{url}/api/me/", timeout=2)
            return server, url
        except requests.RequestException:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("the ASGI server did not start")


def _stop_server(server: subprocess.Popen) -> None:
    os.killpg(server.pid, 15)
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, 9)
        server.wait()


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[18]


def _api_p95(url: str, tokens: list[str]) -> float:
    def one(n: int) -> float:
        start = time.perf_counter()
        response = requests.get(
            f"{url}/api/me/", headers={"Authorization": f"Token {tokens[n % len(tokens)]}"}
        )
        assert response.status_code == 200, response.text
        return (time.perf_counter() - start) * 1000

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return _p95(list(pool.map(one, range(API_SAMPLES))))


def _give_back(pool) -> None:
    VirtualMachine.objects.filter(pool=pool).update(owner=None)


def _allocation_rate(url: str, pool_id: int, tokens: list[str]) -> float:
    """Allocations per second, CONCURRENCY at a time."""

    def one(n: int) -> None:
        response = requests.post(
            f"{url}/api/vmpools/{pool_id}/allocatevm/",
            headers={"Authorization": f"Token {tokens[n % len(tokens)]}"},
        )
        assert response.status_code == 200, response.text

    start = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, range(ALLOCATIONS)))
    return ALLOCATIONS / (time.perf_counter() - start)


class Streams:
    """STREAMS event-stream connections drained by one thread, each reconnecting as a browser
    does when its response ends (every CORRAL_EVENT_STREAM_SECONDS, on the same connection,
    with Last-Event-ID); records when a marker message reached each."""

    def __init__(self, url: str, cookies: list[str]):
        self.host, self.port = url.removeprefix("http://").split(":")
        self.socks = []
        self.cookie_of: dict[socket.socket, str] = {}
        self.last_id: dict[socket.socket, bytes] = {}
        self.reconnections = 0
        self.marker = b""
        self.arrived: dict[socket.socket, float] = {}
        self.tails: dict[socket.socket, bytes] = {}
        self.stopping = False
        self.selector = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()
        # Opened over one stream's length, as pages are opened over time: their reconnections
        # then come evenly (STREAMS / CORRAL_EVENT_STREAM_SECONDS a second), not all at once.
        batches = 25
        for batch in range(batches):
            opened = []
            for n in range(batch, STREAMS, batches):
                sock = socket.create_connection((self.host, int(self.port)), timeout=60)
                self.cookie_of[sock] = cookies[n % len(cookies)]
                self._ask(sock)
                opened.append(sock)
            for sock in opened:
                head = sock.recv(65536)
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"a stream was refused: {head[:200]!r}")
                self._note_ids(sock, head)
                sock.setblocking(False)
                with self.lock:
                    self.selector.register(sock, selectors.EVENT_READ)
                self.socks.append(sock)
            time.sleep(settings.CORRAL_EVENT_STREAM_SECONDS / batches)
        self.reconnections = 0

    def _ask(self, sock: socket.socket) -> None:
        resume = self.last_id.get(sock)
        header = f"Last-Event-ID: {resume.decode()}\r\n" if resume else ""
        cookie = f"{settings.SESSION_COOKIE_NAME}={self.cookie_of[sock]}"
        sock.sendall(
            f"GET /events/stream/ HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Cookie: {cookie}\r\n{header}\r\n".encode()
        )

    def _note_ids(self, sock: socket.socket, data: bytes) -> None:
        ids = re.findall(rb"^id: (\d+)$", data, re.MULTILINE)
        if ids:
            self.last_id[sock] = ids[-1]

    def _drain(self) -> None:
        while not self.stopping:
            with self.lock:
                ready = self.selector.select(0) if self.selector.get_map() else []
            if not ready:
                time.sleep(0.01)
                continue
            for key, _ in ready:
                sock = key.fileobj
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    continue
                now = time.monotonic()
                data = self.tails.get(sock, b"") + chunk
                self.tails[sock] = data[-300:]
                self._note_ids(sock, chunk)
                if self.marker and self.marker in data and sock not in self.arrived:
                    self.arrived[sock] = now
                if data.endswith(b"\r\n0\r\n\r\n"):  # the response ended: reconnect
                    self.tails[sock] = b""
                    self.reconnections += 1
                    self._ask(sock)

    def fan_out_seconds(self, emit) -> float:
        self.arrived = {}
        self.marker = f"fan-out {time.monotonic()}".encode()
        start = time.monotonic()
        emit(self.marker.decode())
        deadline = start + 30
        while len(self.arrived) < len(self.socks) and time.monotonic() < deadline:
            time.sleep(0.02)
        if len(self.arrived) < len(self.socks):
            return float("inf")
        return max(self.arrived.values()) - start

    def close(self) -> None:
        self.stopping = True
        self.thread.join(5)
        for sock in self.socks:
            sock.close()


def open_streams(measure):
    """500 open streams from 50 non-superusers against `make serve`'s server."""
    workers = int(os.environ.get("WEB_WORKERS", "2"))
    size = ALLOCATIONS + 10
    pool = _pool(size, up=size, prestarted=size)
    shared = VirtualMachine.objects.filter(pool=pool).first()
    user_role = Role.objects.get(name="UserRole")
    users = []
    for n in range(USERS):
        user, _ = User.objects.get_or_create(username=f"webbench-{n}")
        grant_role(user_role, pool, user=user)
        grant_role(user_role, shared, user=user)
        users.append(user)
    tokens = [Token.objects.get_or_create(user=user)[0].key for user in users]
    cookies = []
    for user in users:
        client = Client()
        client.force_login(user)
        cookies.append(client.cookies[settings.SESSION_COOKIE_NAME].value)

    def emit(message: str) -> None:
        events.emit(EventKind.CHANGED, "vm", shared.pk, message, vm_id=shared.pk)

    server, url = _start_server(workers)
    try:
        _api_p95(url, tokens)  # warm the workers
        # Idle before and after the load, averaged: the machine's own drift counts for neither.
        idle_p95s, idle_rates = [_api_p95(url, tokens)], [_allocation_rate(url, pool.pk, tokens)]
        _give_back(pool)
        streams = Streams(url, cookies)
        try:
            fan_out = statistics.median(streams.fan_out_seconds(emit) for _ in range(3))
            loaded_p95 = _api_p95(url, tokens)
            loaded_rate = _allocation_rate(url, pool.pk, tokens)
            _give_back(pool)
            reconnections = streams.reconnections
        finally:
            streams.close()
        idle_p95s.append(_api_p95(url, tokens))
        idle_rates.append(_allocation_rate(url, pool.pk, tokens))
    finally:
        _stop_server(server)
        _remove([pool])
    idle_p95, idle_rate = statistics.mean(idle_p95s), statistics.mean(idle_rates)
    ratio = loaded_p95 / idle_p95
    kept = loaded_rate / idle_rate
    where = f"{STREAMS} streams, {USERS} users, {workers} web processes"
    seconds = settings.CORRAL_EVENT_STREAM_SECONDS
    return [
        (
            f"GET /api/me/ p95 with {where} vs idle",
            f"{loaded_p95:.1f} ms vs {idle_p95:.1f} ms ({ratio:.2f}x)",
            "<= 2x",
            "yes" if ratio <= 2 else "NO",
        ),
        (
            f"one event reaching every entitled stream ({where})",
            f"{fan_out:.2f} s (median of 3; streams of {seconds:.0f} s, "
            f"{reconnections} reconnections)",
            "<= 2 s",
            "yes" if fan_out <= 2 else "NO",
        ),
        (
            f"allocations/s with {where} vs idle",
            f"{loaded_rate:.1f} vs {idle_rate:.1f} ({kept:.0%})",
            ">= 50%",
            "yes" if kept >= 0.5 else "NO",
        ),
    ]


ALL.append(open_streams)
