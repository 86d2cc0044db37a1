"""Fixtures for the reliability tests: real web processes (gunicorn) on the test database,
and API tokens."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from lab.childprocess import database_env, free_port
from project.access.tokens import issue as issue_token
from tests.conftest import wait_until

REPO = Path(__file__).resolve().parents[2]
READY_S = 60
STOP_S = 30


class WebServer:
    """``gunicorn project.wsgi`` (2 workers of 4 threads) in its own process group, serving
    the test database with the settings a deployment would use (DEBUG off)."""

    name = "gunicorn"  # in what a failure says

    def __init__(self, log_path: Path, environ: dict[str, str] | None = None, **env):
        """``environ``: the environment to start from (this process's by default); ``env``
        is set over it, after the test database and the deployment defaults."""
        self.log_path = log_path
        self.env = dict(os.environ if environ is None else environ)
        self.env.pop("SQLITE_PATH", None)
        self.env.pop("DATABASE_URL", None)
        self.env.update(
            DJANGO_SETTINGS_MODULE="project.test_settings",
            ALLOWED_HOSTS="127.0.0.1",
            DEBUG="0",
            **database_env(),
        )
        self.env.update({k: str(v) for k, v in env.items()})
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self, port: int | None = None) -> WebServer:
        """Start it on ``port`` (a free one if not given)."""
        for _attempt in range(3):
            bind = port or free_port()
            self.url = f"http://127.0.0.1:{bind}"
            self._spawn(bind)
            try:
                ready = wait_until(self._ready, timeout=READY_S, message=self._why_not_ready)
            except AssertionError:
                self.stop()  # never left running (its workers restarted forever) after a test
                raise
            if ready == "up":
                return self
            # Another process took the port between the probe and gunicorn's bind: again.
            self.stop()
        raise AssertionError(f"{self.name} could not bind a port: {self.log()[-3000:]}")

    def restart(self) -> WebServer:
        """Stop it (SIGTERM) and start it again on the same port, as a service is restarted."""
        self.stop()
        return self.start(port=int(self.url.rsplit(":", 1)[1]))

    def reload(self) -> None:
        """A deploy without a gap: the master starts new workers and stops the old (SIGHUP)."""
        self.process.send_signal(signal.SIGHUP)

    def command(self, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "gunicorn",
            "project.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--worker-class",
            "gthread",
            "--threads",
            "4",
            "--timeout",
            "120",
            "--graceful-timeout",
            "5",
            "--access-logfile",
            "-",
        ]

    def _spawn(self, port: int) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            self.command(port),
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def _ready(self) -> str | None:
        if self.process.poll() is not None:
            if "Address already in use" in self.log():
                return "port taken"
            raise AssertionError(f"{self.name} exited at start: {self.log()[-3000:]}")
        try:
            requests.get(f"{self.url}/api/me/", timeout=5)
        except (requests.ConnectionError, requests.Timeout):
            return None  # not listening yet, or its workers still loading on a busy machine
        return "up"

    def _why_not_ready(self) -> str:
        return f"{self.name} did not answer within {READY_S} s: {self.log()[-3000:]}"

    def stop(self) -> None:
        """Stop the master and its workers (SIGTERM to the group; SIGKILL if they linger)."""
        if not self.process:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_S)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def web_server(transactional_db, tmp_path):
    """start(**env) -> a running WebServer on the test database; all stopped afterwards."""
    started: list[WebServer] = []

    def start(**env) -> WebServer:
        server = WebServer(tmp_path / f"gunicorn-{len(started)}.log", **env)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


def token_for(user) -> dict[str, str]:
    """The Authorization header of a new API token for ``user``."""
    return {"Authorization": f"Token {issue_token(user)[1]}"}
