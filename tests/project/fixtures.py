"""Fixtures for the web tier: the ASGI server of `make serve` on the test database, and browser
sessions to talk to it as a signed-in user."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.test import Client

from lab.childprocess import asgi_command
from tests.reliability.conftest import WebServer


class AsgiServer(WebServer):
    """``gunicorn project.asgi:application`` with uvicorn workers (as `make serve` runs it),
    in its own process group, on the test database with DEBUG off."""

    name = "the ASGI server"

    def __init__(self, log_path: Path, workers: int = 1, **env):
        # A pool of connections per process, as `make serve` has on PostgreSQL.
        super().__init__(log_path, **{"CORRAL_DB_POOL_SIZE": "10", **env})
        self.workers = workers

    def command(self, port: int) -> list[str]:
        return [*asgi_command(f"127.0.0.1:{port}", self.workers), "--graceful-timeout", "3"]


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
