"""Simulated hosts: one libvirt daemon per host, serving libvirt's test driver; and light
simulated hosts, all served by one process without libvirt (``lab/lightsim/server.py``).

Every process (web server, task workers, tests) reaches a simulated host over libvirt's real
RPC, so they all see the same domains. Each daemon runs in session mode as an unprivileged
user in its own directory (two system-mode daemons would collide on /run/libvirt); where the
group ``kvm`` exists and the CPU has hardware virtualization the daemon is in it, so QEMU
hosts' guests run on KVM:

    <base>/<name>/run/libvirt/libvirt-sock    the socket (URI: test+unix:///default?socket=...)
    <base>/<name>/corral-libvirtd.pid         the pid Corral started, the only one it stops
    <base>/<name>/corral-domains.json         its domains while it is stopped (lab/hoststate.py)

Stopping a host (``stop``) keeps its persistent domains, as a real host keeps them across a
restart: they are defined again when it starts, and those that ran run again. A host killed
(``kill``) keeps nothing.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import libvirt

from hosts.driver import DriverError
from hosts.driver.libvirt.connection import drop
from lab import hoststate

UNPRIVILEGED_USER = "nobody"
# The group that may open /dev/kvm (Debian's udev rule; ``make system-packages`` sets it up).
KVM_GROUP = "kvm"
LIBVIRTD = shutil.which("libvirtd") or "/usr/sbin/libvirtd"
PID_FILE = "corral-libvirtd.pid"


class SimHostError(Exception):
    pass


@dataclass(frozen=True)
class SimHost:
    name: str
    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / "run" / "libvirt" / "libvirt-sock"

    @property
    def uri(self) -> str:
        return f"test+unix:///default?socket={self.socket}"

    @property
    def pid_file(self) -> Path:
        return self.directory / PID_FILE

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _alive(pid) else None


def _alive(pid: int, program: bytes = b"libvirtd") -> bool:
    """Whether ``pid`` is a running ``program`` (not gone, not a zombie, not a reused pid)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own exited child
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state != "Z" and program in command


def start(host: SimHost, timeout: float = 15.0) -> int:
    """Start the simulated host unless it runs already, with the domains it had when it was
    last stopped; returns its daemon's pid."""
    running = host.pid()
    if running is not None and host.socket.exists():
        return running
    pid = start_daemon(host, timeout)
    hoststate.restore(host.uri, host.directory)
    return pid


def start_daemon(
    host: SimHost, timeout: float = 15.0, qemu_conf: str = "", libvirtd_conf: str = ""
) -> int:
    """Start the daemon for ``host`` unless it runs already; returns its pid. ``qemu_conf``:
    the daemon's QEMU driver settings (its ``qemu.conf``); ``libvirtd_conf``: the daemon's own
    (its ``libvirtd.conf``: how it authenticates clients, its access control)."""
    running = host.pid()
    if running is not None and host.socket.exists():
        return running
    if not Path(LIBVIRTD).exists():
        raise SimHostError(
            "libvirtd is not installed: apt-get install --no-install-recommends libvirt-daemon"
        )
    host.directory.mkdir(parents=True, exist_ok=True)
    if host.socket.exists():
        host.socket.unlink()
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "HOME": str(host.directory),
        "XDG_RUNTIME_DIR": str(host.directory / "run"),
        "XDG_CONFIG_HOME": str(host.directory / "cfg"),
        "XDG_CACHE_HOME": str(host.directory / "cache"),
    }
    extra = {}
    if os.geteuid() == 0:
        # As root, a session daemon must run as an ordinary user (see docs/architecture.md).
        account = pwd.getpwnam(UNPRIVILEGED_USER)
        os.chown(host.directory, account.pw_uid, account.pw_gid)
        os.chmod(host.directory, 0o755)
        for parent in host.directory.parents:
            if not parent.stat().st_mode & 0o001:
                raise SimHostError(
                    f"{parent} is not reachable by the user {UNPRIVILEGED_USER!r} that runs the "
                    "simulated host; set CORRAL_SIMHOSTS_DIR to a folder under /tmp."
                )
        extra = {"user": account.pw_uid, "group": account.pw_gid}
        kvm = kvm_group_id()
        if kvm is not None:
            # As ``runuser -u nobody -G kvm`` would start it: its guests run on KVM, where
            # without the group QEMU would silently fall back to TCG.
            extra["extra_groups"] = [kvm]
    if qemu_conf:
        _write_config(host, "libvirt/qemu.conf", qemu_conf, extra)
    if libvirtd_conf:
        _write_config(host, "libvirt/libvirtd.conf", libvirtd_conf, extra)
    return _serve(
        [LIBVIRTD],
        host.directory / "libvirtd.log",
        host.pid_file,
        host.socket,
        f"libvirtd for {host.name}",
        timeout,
        env=env,
        cwd=host.directory,
        **extra,
    )


def hardware_virtualization() -> bool:
    """Whether the CPU has VT-x or AMD-V. Without them a /dev/kvm may still open, but be a
    nested host's software KVM (such as kvm-pvm) on which an ordinary guest kernel hangs."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = {
        flag for line in cpuinfo.splitlines() if line.startswith("flags") for flag in line.split()
    }
    return bool(flags & {"vmx", "svm"})


def kvm_group_id() -> int | None:
    """The group ``kvm`` for the daemons to run in, where it exists and guests can use KVM."""
    if not hardware_virtualization():
        return None
    try:
        return grp.getgrnam(KVM_GROUP).gr_gid
    except KeyError:
        return None


def _serve(
    command: list[str],
    log_path: Path,
    pid_file: Path,
    socket: Path,
    what: str,
    timeout: float,
    **popen,
) -> int:
    """Start ``command`` in a session of its own, logging to ``log_path``, its pid recorded in
    ``pid_file``; its pid once it listens on ``socket``."""
    log = open(log_path, "ab")  # noqa: SIM115 (owned by the process)
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **popen,
    )
    log.close()
    pid_file.write_text(f"{process.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if socket.exists():
            return process.pid
        if process.poll() is not None:
            raise SimHostError(f"{what} exited with {process.returncode}; see {log_path}")
        time.sleep(0.05)
    raise SimHostError(f"{what} did not open its socket within {timeout:.0f} s")


def _write_config(host: SimHost, name: str, text: str, owner: dict) -> None:
    """Write ``name`` under the daemon's configuration folder, owned (with the folders made for
    it) by the user the daemon runs as, which must go on writing there."""
    path = host.directory / "cfg" / name
    made = [folder for folder in reversed(path.parents) if host.directory in folder.parents]
    for folder in made:
        folder.mkdir(exist_ok=True)
    path.write_text(text)
    if owner:
        for made_path in (*made, path):
            os.chown(made_path, owner["user"], owner["group"])


def stop(host: SimHost, timeout: float = 10.0) -> bool:
    """Stop the simulated host, keeping its persistent domains for its next start; True if
    it ran."""
    if host.pid() is not None:
        with contextlib.suppress(DriverError, libvirt.libvirtError):
            hoststate.save(host.uri, host.directory)
        drop(host.uri)
    return stop_daemon(host, timeout)


def stop_daemon(host: SimHost, timeout: float = 10.0) -> bool:
    """Stop the daemon Corral started for ``host`` (by its recorded pid); True if it ran."""
    pid = host.pid()
    if pid is None:
        host.pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        _kill_and_wait(pid)
    host.pid_file.unlink(missing_ok=True)
    return True


def _kill_and_wait(pid: int, timeout: float = 10.0, program: bytes = b"libvirtd") -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _alive(pid, program) and time.monotonic() < deadline:
        time.sleep(0.02)


def kill(host: SimHost) -> None:
    """Kill the daemon at once (SIGKILL), as a crashed host would vanish."""
    pid = host.pid()
    if pid is not None:
        _kill_and_wait(pid)


def discover(base: Path) -> list[SimHost]:
    """Every simulated host folder under ``base`` (running or not)."""
    if not base.exists():
        return []
    return [
        SimHost(name=path.name, directory=path)
        for path in sorted(base.iterdir())
        # Links name real QEMU hosts' short folders: lab/qemuhosts.py lists those.
        if path.is_dir() and not path.is_symlink() and (path / PID_FILE).exists()
    ]


# -- light simulated hosts: one process serves them all (lab/lightsim/server.py) -------------

LIGHT_FOLDER = "lightsim"
LIGHT_PID_FILE = "corral-lightsim.pid"


@dataclass(frozen=True)
class LightServer:
    """The one process serving every light simulated host under ``directory``."""

    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / "sock"

    @property
    def pid_file(self) -> Path:
        return self.directory / LIGHT_PID_FILE

    def uri(self, name: str) -> str:
        return f"lightsim+unix:///{name}?socket={self.socket}"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _alive(pid, b"lab.lightsim.server") else None


def light_server(base: Path) -> LightServer:
    return LightServer(base / LIGHT_FOLDER)


def start_light(server: LightServer, timeout: float = 15.0) -> int:
    """Start the light hosts' process unless it runs already; returns its pid."""
    running = server.pid()
    if running is not None and server.socket.exists():
        return running
    server.directory.mkdir(parents=True, exist_ok=True)
    return _serve(
        [sys.executable, "-m", "lab.lightsim.server", str(server.socket)],
        server.directory / "lightsim.log",
        server.pid_file,
        server.socket,
        "The light hosts' process",
        timeout,
        cwd=Path(__file__).resolve().parent.parent,
    )


def stop_light(server: LightServer) -> bool:
    """Stop the light hosts' process this module started (by its recorded pid)."""
    pid = server.pid()
    server.pid_file.unlink(missing_ok=True)
    if pid is None:
        return False
    _kill_and_wait(pid, program=b"lab.lightsim.server")
    return True
