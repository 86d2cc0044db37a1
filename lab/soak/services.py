"""What the soak runs, each in a process of its own on this machine: a PostgreSQL server and a
Redis of the soak's own (so that restarting them disturbs nothing else the machine serves),
the production web tier (`make serve`) and task clusters (`manage.py qcluster`).

Each child leads its own process group, so that a fault can kill or freeze all of it, and
``stop`` leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from lab.childprocess import free_port

REPO = Path(__file__).resolve().parents[2]
# What owns the PostgreSQL data folder when the soak runs as root (initdb refuses root).
POSTGRES_USER = "postgres"


class SoakError(Exception):
    """The soak cannot run here (a missing program), or a part of it did not come up."""


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _wait_for(what: str, ready, timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise SoakError(f"{what} did not come up within {timeout:.0f} s. {tail}")
        time.sleep(0.1)


class Postgres:
    """A PostgreSQL server of the soak's own: a data folder under ``directory``, listening on
    127.0.0.1:``port`` with trust authentication (nothing else reaches the loopback here).
    ``restart`` is what ``pg_ctlcluster … restart`` does to a Debian cluster (``pg_ctl
    restart``, fast shutdown: open sessions are ended)."""

    def __init__(self, directory: Path, port: int | None = None):
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "postgres.log"
        self.port = port or free_port()
        self.bin = self._bin()

    @staticmethod
    def _bin() -> Path:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
        if not found:
            raise SoakError(
                "PostgreSQL's server programs are not installed "
                "(apt-get install --no-install-recommends postgresql)."
            )
        return Path(found[-1]).parent

    def _run(self, *argv: str) -> None:
        prefix = []
        if os.geteuid() == 0:
            prefix = ["runuser", "-u", POSTGRES_USER, "--"]
        subprocess.run(
            [*prefix, *argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> Postgres:
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            account = pwd.getpwnam(POSTGRES_USER)
            os.chown(self.directory, account.pw_uid, account.pw_gid)
        if not (self.data / "PG_VERSION").exists():
            self._run(
                str(self.bin / "initdb"),
                *("-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8"),
                "--no-sync",
            )
        self._ctl("start")
        return self

    def _ctl(self, action: str) -> None:
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c max_connections=300 -c fsync=off -c synchronous_commit=off"
        )
        argv = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60"]
        if action == "stop":
            self._run(*argv, "-m", "fast", "stop")
        else:
            self._run(*argv, "-m", "fast", "-l", str(self.log), "-o", options, action)

    def restart(self) -> None:
        self._ctl("restart")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._ctl("stop")

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')


def _version(path: str) -> tuple[int, ...]:
    part = Path(path).parents[1].name
    return tuple(int(p) for p in part.split(".") if p.isdigit())


class Child:
    """A process (and its process group) started by the soak, with its output in a log."""

    name = "child"

    def __init__(self, argv: list[str], env: dict[str, str], log: Path):
        self.argv = argv
        self.env = env
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> Child:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """kill -9 the whole group, as a crash would."""
        self.signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def stop(self, timeout: float = 20) -> None:
        if not self.running():
            self.signal_group(signal.SIGKILL)  # what it left behind, if anything
            return
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)
        self.kill()

    def group(self) -> list[int]:
        """The pids of the process group, the leader first."""
        if not self.running():
            return []
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.getpgid(int(entry.name)) == self.process.pid:
                    pids.append(int(entry.name))
        return sorted(pids)


class Redis(Child):
    """A Redis of the soak's own, keeping nothing on disk (as the machine's): a restart loses
    what was queued in it."""

    name = "redis"

    def __init__(self, directory: Path, port: int | None = None):
        self.port = port or free_port()
        program = shutil.which("redis-server")
        if program is None:
            raise SoakError("redis-server is not installed (apt-get install redis-server).")
        argv = [program, "--bind", "127.0.0.1", "--port", str(self.port), "--save", ""]
        argv += ["--appendonly", "no", "--dir", str(directory)]
        super().__init__(argv, dict(os.environ), directory / "redis.log")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Redis:
        super().start()
        _wait_for("Redis", lambda: _listening(self.port), 20, self.log)
        return self


class WebTier(Child):
    """`make serve`: gunicorn supervising WEB_WORKERS uvicorn workers on HOST:PORT."""

    name = "web"

    def __init__(self, env: dict[str, str], log: Path, port: int | None = None, workers: int = 2):
        self.port = port or free_port()
        env = {**env, "HOST": "127.0.0.1", "PORT": str(self.port), "WEB_WORKERS": str(workers)}
        super().__init__(["make", "--no-print-directory", "serve"], env, log)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> WebTier:
        super().start()

        def up() -> bool:
            if not self.running():
                raise SoakError(f"make serve exited: {self.log.read_text()[-2000:]}")
            return _listening(self.port) and len(self.workers()) >= 1

        _wait_for("make serve", up, timeout, self.log)
        return self

    def workers(self) -> list[int]:
        """The web worker processes (gunicorn's children), not its master."""
        group = self.group()
        parents = {pid: _parent(pid) for pid in group}
        masters = {pid for pid in group if b"gunicorn" in _cmdline(pid)}
        return [pid for pid in group if pid in masters and parents[pid] in masters]


class TaskCluster(Child):
    """`manage.py qcluster`: a task cluster (its sentinel and workers, its ticker)."""

    name = "task cluster"

    def __init__(self, env: dict[str, str], log: Path):
        super().__init__([sys.executable, "manage.py", "qcluster"], env, log)


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
