"""Starting a child process (a web server, a task cluster) on the database this process uses,
as `manage.py devstack`, the benchmarks and the tests do (never the product itself)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from django.db import connection

REPO = Path(__file__).resolve().parent.parent


def database_env() -> dict[str, str]:
    """The environment a child process needs to open this process's database."""
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"SQLITE_PATH": str(settings_dict["NAME"])}
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or "5432"
    return {"DATABASE_URL": f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}"}


def child_env(**env: object) -> dict[str, str]:
    """This process's environment on this process's database (whichever it named), with
    ``env`` set over it."""
    values = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_PATH")}
    values.update(database_env())
    values.update({k: str(v) for k, v in env.items()})
    return values


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The web tier's database settings as `make serve` sets them (Makefile): a pool of connections
# per process, none kept after a request.
SERVE_ENV = {"CORRAL_DB_POOL_SIZE": "20", "CONN_MAX_AGE": "0"}


def asgi_command(bind: str, workers: int, *, share_port: bool = False) -> list[str]:
    """The ASGI web tier as `make serve` runs it (gunicorn supervising uvicorn workers), on
    ``bind`` (host:port) with ``workers`` processes. ``share_port``: as `make serve`, the port
    may be shared with another such tier (SO_REUSEPORT), so that a deploy starts the new tier
    beside the old one before it stops the old (docs/production.md)."""
    return [
        *(sys.executable, "-m", "gunicorn", "project.asgi:application"),
        *("--worker-class", "project.web.worker.UvicornWorker", "--workers", str(workers)),
        *("--bind", bind),
        *(("--reuse-port",) if share_port else ()),
    ]


def start_task_cluster(log: Path, **env: object) -> subprocess.Popen:
    """``manage.py qcluster`` on this process's database (the test settings, ``env`` set over
    them) in a session of its own, its output appended to ``log``: stop it with
    ``os.killpg(process.pid, ...)``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=REPO,
            env=child_env(DJANGO_SETTINGS_MODULE="project.test_settings", **env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
