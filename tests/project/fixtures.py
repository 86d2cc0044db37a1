"""Fixtures for the web tier: the ASGI server of `make serve` on the test database (in a process
of its own, or in this one with the test's settings), and browser sessions and API tokens to talk
to it as a signed-in user."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
import requests
import uvicorn
from django.conf import settings
from django.db import connections
from django.test import Client

from lab.childprocess import asgi_command
from project.access import tokens
from project.web.request_threads import POOL
from tests.conftest import wait_until
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


class InProcessAsgiServer:
    """``project.asgi:application`` served by uvicorn on a thread of the test process: every
    request goes the ASGI way `make serve` takes it (the live requests' gate and direct
    answers, Django's ASGI handler on its request threads), under the test's settings."""

    def __init__(self, application=None) -> None:
        """``application``: the one of project.asgi by default."""
        if application is None:
            from project.asgi import application  # the whole web tier: loaded where it is used

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        host, port = self._socket.getsockname()
        self.url = f"http://{host}:{port}"
        config = uvicorn.Config(
            application, lifespan="off", log_level="warning", timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def start(self) -> InProcessAsgiServer:
        self._thread.start()
        wait_until(lambda: self._server.started, 30, message="the ASGI server never started")
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._socket.close()
        assert not self._thread.is_alive(), "the ASGI server did not stop"
        # The request threads stay for the next requests: their database connections go now.
        for thread in list(POOL._idle):
            thread.submit(connections.close_all).result(10)

    def client(self, user=None, *, credential: str = "token") -> LiveClient:
        """A client of this server signed in as ``user`` (None: anonymous) with an API token
        (``credential`` "token") or a browser session ("session")."""
        client = LiveClient(self.url)
        if user is not None and credential == "token":
            client.session.headers["Authorization"] = f"Token {tokens.issue(user)[1]}"
        elif user is not None:
            client.session.cookies.update(session_cookie(user))
        return client


class LiveClient:
    """Requests to one server, a path at a time (``requests``: a streamed body is read as it
    comes, with ``stream=True``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()

    def get(self, path: str, params=None, **kwargs) -> requests.Response:
        kwargs.setdefault("timeout", 60)
        kwargs.setdefault("allow_redirects", False)
        return self.session.get(f"{self.url}{path}", params=params, **kwargs)


@pytest.fixture
def asgi_app(transactional_db, settings):
    """An InProcessAsgiServer, started; stopped after the test. Its address is an allowed
    host, as a deployment's own is."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
    server = InProcessAsgiServer().start()
    yield server
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
