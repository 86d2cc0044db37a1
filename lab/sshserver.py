"""An SSH server on this machine's loopback, standing for a host reached over SSH that answers
but does not let Corral in: a login it refuses, a host key other than the one trusted, no
libvirt behind a login it accepts.

It is dropbear, from Debian's ``dropbear-bin`` (fetched with ``apt-get download`` and extracted
once into ``<VAR_DIR>/sshserver/``, with the two libraries it needs that a QEMU host lacks,
as the tiny guest's build does): nothing is installed on the machine. Started as root in a
mount namespace of its own, where ``/root`` is a folder of the server's (its
``.ssh/authorized_keys`` holds only the server's client key) and ``/run`` is empty, so the
``virt-ssh-helper`` that libvirt runs on the host after logging in finds no libvirt daemon.

libvirt's ``ssh`` transport runs the ``ssh`` program it finds on ``PATH`` and trusts the host
keys of the user's ``~/.ssh/known_hosts`` (its URI's ``known_hosts`` is for ``libssh`` only):
``client_path`` is a folder holding an ``ssh`` that runs the real one with the known hosts and
identity given (and nothing of the user's own), for a test to put first on ``PATH``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lab import debpackages

PACKAGES = ("dropbear-bin", "libtomcrypt1", "libtommath1")
SERVER = "usr/sbin/dropbear"
KEYGEN = "usr/bin/dropbearkey"
LIBRARIES = "usr/lib/x86_64-linux-gnu"
SSH = "/usr/bin/ssh"
START_TIMEOUT_S = 10.0


class SshServerError(Exception):
    pass


def default_directory() -> Path:
    from django.conf import settings

    return Path(settings.VAR_DIR) / "sshserver"


def build(directory: Path | None = None) -> Path:
    """The extracted packages (a folder holding ``usr/``), fetched once per set of versions;
    safe from several processes at once (``debpackages.build_once``)."""
    base = Path(directory) if directory is not None else default_directory()
    records = debpackages.package_records(list(PACKAGES))
    wanted = [f"{name}={records[name]['Version']}" for name in PACKAGES]
    key = hashlib.sha256(json.dumps(wanted).encode()).hexdigest()[:12]
    target = base / f"dropbear-{key}"

    def build_into(result: Path, work: Path) -> None:
        debpackages.run(["apt-get", "download", *wanted], cwd=work)
        for deb in sorted(work.glob("*.deb")):
            debpackages.run(["dpkg-deb", "-x", str(deb), str(result)])
        (result / "manifest.json").write_text(json.dumps({"packages": wanted}, indent=2) + "\n")

    debpackages.build_once(target, build_into)
    return target


@dataclass
class SshServer:
    """A running dropbear on ``127.0.0.1:port``; its files are in ``directory``."""

    directory: Path
    port: int
    process: subprocess.Popen | None = None

    @property
    def client_key(self) -> Path:
        """The private key the server lets in (as root)."""
        return self.directory / "client-key"

    @property
    def other_key(self) -> Path:
        """A private key the server refuses."""
        return self.directory / "other-key"

    @property
    def host_key_line(self) -> str:
        """The server's host key as ``known_hosts`` names it (``type base64``)."""
        return (self.directory / "host-key.pub").read_text().strip()

    def uri(self, user: str = "root", key: Path | None = None) -> str:
        """A QEMU system URI reaching the server as ``user`` with ``key`` (the client key)."""
        key = key or self.client_key
        return f"qemu+ssh://{user}@127.0.0.1:{self.port}/system?keyfile={key}&no_tty=1"

    def client_path(self, known_host_key: str | None) -> Path:
        """A new folder with an ``ssh`` trusting only ``known_host_key`` for this server (none:
        it knows no host), to put first on ``PATH``. Inside the server's own short folder:
        libvirt reads at most 1 KiB of what ssh prints, and ssh's warning of a changed host
        key names its known hosts file three times."""
        folder = Path(tempfile.mkdtemp(prefix="c-", dir=self.directory))
        known = folder / "known_hosts"
        known.write_text(f"[127.0.0.1]:{self.port} {known_host_key}\n" if known_host_key else "")
        program = folder / "ssh"
        program.write_text(
            "#!/bin/sh\n"
            f"exec {SSH} -F /dev/null -o UserKnownHostsFile={known} "
            '-o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes "$@"\n'
        )
        program.chmod(0o755)
        return folder


def start(packages: Path | None = None) -> SshServer:
    """A dropbear listening on a free loopback port, in its own mount namespace (root only)."""
    if os.geteuid() != 0:
        raise SshServerError("The lab's SSH server needs root (a mount namespace of its own).")
    tree = packages or build()
    directory = Path(tempfile.mkdtemp(prefix="corral-ssh-"))
    home = directory / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    env = {**os.environ, "LD_LIBRARY_PATH": str(tree / LIBRARIES)}
    debpackages.run(
        [str(tree / KEYGEN), "-t", "ed25519", "-f", str(directory / "host-key")], env=env
    )
    public = debpackages.run([str(tree / KEYGEN), "-y", "-f", str(directory / "host-key")], env=env)
    line = next(row for row in public.splitlines() if row.startswith("ssh-"))
    (directory / "host-key.pub").write_text(" ".join(line.split()[:2]) + "\n")
    for name in ("client-key", "other-key"):
        debpackages.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / name)]
        )
    shutil.copyfile(directory / "client-key.pub", home / ".ssh" / "authorized_keys")
    (home / ".ssh" / "authorized_keys").chmod(0o600)
    port = _free_port()
    script = (
        f"mount --bind {home} /root && mount -t tmpfs corral-empty-run /run && "
        f"exec {tree / SERVER} -F -E -s -p 127.0.0.1:{port} -r {directory / 'host-key'} "
        f"-P {directory / 'dropbear.pid'}"
    )
    log = open(directory / "dropbear.log", "ab")  # noqa: SIM115
    process = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    server = SshServer(directory=directory, port=port, process=process)
    _wait_listening(server)
    return server


def stop(server: SshServer) -> None:
    """Stop the server (its process group: dropbear and any session it forked) and remove its
    files."""
    if server.process is not None and server.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()
    shutil.rmtree(server.directory, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_listening(server: SshServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log = (server.directory / "dropbear.log").read_text(errors="replace")
            raise SshServerError(f"dropbear exited ({server.process.returncode}): {log[-2000:]}")
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", server.port), timeout=0.5),
        ):
            return
        time.sleep(0.05)
    stop(server)
    raise SshServerError(
        f"dropbear did not listen on port {server.port} within {START_TIMEOUT_S} s"
    )
