"""Fixtures for the web tier: the ASGI server of `make serve` on the test database, and browser
sessions to talk to it as a signed-in user."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.test import Client

from project.childprocess import database_env, free_port
from tests.conftest import wait_until

REPO = Path(__file__).resolve().parents[2]
READY_S = 60
STOP_S = 20


class AsgiServer:
    """``gunicorn project.asgi:application`` with uvicorn workers (as `make serve` runs it),
    in its own process group, on the test database with DEBUG off."""

    def __init__(self, log_path: Path, workers: int = 1, **env):
        self.log_path = log_path
        self.workers = workers
        self.env = dict(os.environ)
        self.env.pop("SQLITE_PATH", None)
        self.env.pop("DATABASE_URL", None)
        self.env.update(
            DJANGO_SETTINGS_MODULE="project.test_settings",
            ALLOWED_HOSTS="127.0.0.1",
            DEBUG="0",
            CORRAL_DB_POOL_SIZE="10",  # as `make serve` (a pool on PostgreSQL)
            **database_env(),
        )
        self.env.update({k: str(v) for k, v in env.items()})
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> AsgiServer:
        for _attempt in range(3):
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            log = open(self.log_path, "wb")  # noqa: SIM115
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "project.asgi:application",
                    "--worker-class",
                    "uvicorn_worker.UvicornWorker",
                    "--workers",
                    str(self.workers),
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--graceful-timeout",
                    "3",
                ],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            if wait_until(self._ready, timeout=READY_S, message=self._why_not) == "up":
                return self
            self.stop()
        raise AssertionError(f"the ASGI server could not bind a port: {self.log()[-3000:]}")

    def _ready(self) -> str | None:
        if self.process.poll() is not None:
            if "Address already in use" in self.log():
                return "port taken"
            raise AssertionError(f"the ASGI server exited at start: {self.log()[-3000:]}")
        try:
            requests.get(f"{self.url}/api/me/", timeout=5)
        except (requests.ConnectionError, requests.Timeout):
            return None
        return "up"

    def _why_not(self) -> str:
        return f"the ASGI server did not answer within {READY_S} s: {self.log()[-3000:]}"

    def stop(self) -> None:
        if not self.process:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_S)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def asgi_server(transactional_db, tmp_path):
    """start(workers=1, **env) -> a running AsgiServer on the test database; stopped after."""
    started = []

    def start(workers: int = 1, **env) -> AsgiServer:
        server = AsgiServer(tmp_path / f"asgi-{len(started)}.log", workers, **env).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def session_cookie(user) -> dict[str, str]:
    """The cookie of a signed-in browser session of ``user`` (stored in the test database)."""
    client = Client()
    client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


class StreamReader(threading.Thread):
    """Reads one server-sent event stream to its end: ``changes`` (event dicts with their id),
    ``blocks`` (every block as sent), ``opened`` once the response began."""

    def __init__(self, url: str, cookies: dict[str, str], last_event_id: int | None = None):
        super().__init__(daemon=True)
        self.url, self.cookies, self.last_event_id = url, cookies, last_event_id
        self.opened = threading.Event()
        self.blocks: list[dict[str, str]] = []
        self.changes: list[dict] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        headers = {} if self.last_event_id is None else {"Last-Event-ID": str(self.last_event_id)}
        try:
            with requests.get(
                self.url, cookies=self.cookies, headers=headers, stream=True, timeout=60
            ) as response:
                assert response.status_code == 200, response.text
                self.opened.set()
                block: dict[str, str] = {}
                for line in response.iter_lines(decode_unicode=True):
                    if line:
                        name, _, value = line.partition(":")
                        block[name] = value.lstrip(" ")
                        continue
                    self.blocks.append(block)
                    if block.get("event") == "change":
                        self.changes.append({"id": int(block["id"]), **json.loads(block["data"])})
                    block = {}
        except BaseException as error:  # noqa: BLE001 - reported by the test that reads it
            self.error = error
            self.opened.set()

    @property
    def last_id(self) -> int | None:
        ids = [int(block["id"]) for block in self.blocks if "id" in block]
        return ids[-1] if ids else None
