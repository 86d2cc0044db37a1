"""Run Corral for development: simulated hosts, a real QEMU host (cluster ``lab``, a pool of
one tiny guest kept running), a task cluster and the web server.

Ctrl-C stops all of it, saying what it waits for: the web server and the task cluster (each
given ``STOP_GRACE`` seconds to finish what it does, then stopped at once: a job cut short is
taken up again by the next run's reaper), then the daemons it started, side by side, which keep
their VMs as a real host shut down with libvirt-guests does (lab/hoststate.py): the next run
finds them as they were.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from lab.childprocess import asgi_command

# Seconds the web server and the task cluster get to finish what they do once asked to stop.
STOP_GRACE = 5.0
# What stopping each at once cuts short.
CUT_SHORT = {
    "task cluster": "a job it ran is taken up again at the next start",
    "web server": "its open requests were cut off",
}


class Command(BaseCommand):
    help = "Start simulated hosts, a qcluster and the ASGI web server; Ctrl-C stops them all."

    def add_arguments(self, parser):
        parser.add_argument("--hosts", type=int, default=3)
        parser.add_argument("--cluster", default="demo")
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument(
            "--lab", default="lab", help="cluster of the real QEMU host ('' for none)"
        )

    def start_lab(self, lab: str) -> str:
        """Start the lab's real QEMU host; '' (and why, in words) when QEMU cannot run here."""
        if shutil.which("qemu-system-x86_64") is None:
            self.stdout.write(
                "No qemu-system-x86_64 here: no lab cluster, no real QEMU host "
                "(make system-packages installs QEMU)."
            )
            return ""
        try:
            call_command("simhosts", "start", "1", "--qemu", "--cluster", lab, "--prefix", "qemu")
        except CommandError as exc:
            self.stdout.write(f"The real QEMU host did not start ({exc}): no lab cluster.")
            return ""
        return lab

    def handle(self, *args, hosts: int, cluster: str, addr: str, lab: str, **options):
        call_command("simhosts", "start", str(hosts), "--cluster", cluster)
        lab = self.start_lab(lab) if lab else ""
        call_command("seed_demo", "--cluster", cluster, "--lab", lab)
        manage = [sys.executable, "manage.py"]
        # Each child leads its own process group, so stopping it stops its workers too.
        children = {
            "task cluster": subprocess.Popen([*manage, "qcluster"], start_new_session=True),
            # The ASGI server of `make serve`, with one process; its connections are not kept
            # after a request (under ASGI each request has its own).
            "web server": subprocess.Popen(
                [*asgi_command(addr, workers=1), "--graceful-timeout", str(int(STOP_GRACE))],
                env={**os.environ, "CONN_MAX_AGE": "0"},
                start_new_session=True,
            ),
        }
        self.stdout.write(
            f"Corral runs: http://{addr}/admin/ (console), http://{addr}/api/docs/ (API). "
            "Ctrl-C stops everything."
        )
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping and all(child.poll() is None for child in children.values()):
                time.sleep(0.5)
        finally:
            self.stop(children)

    def stop(self, children: dict[str, subprocess.Popen]) -> None:
        """Stop the web server and the task cluster (``STOP_GRACE`` seconds each at most, side
        by side), then the hosts; say each step and what it waits for."""
        started = time.monotonic()
        self.stdout.write(
            f"Stopping: the web server and the task cluster (up to {STOP_GRACE:g} s to finish "
            "what they are doing), then the hosts (their running VMs are saved)…"
        )
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE
        for name, child in children.items():
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(max(0.1, deadline - time.monotonic()))
            if child.poll() is None:
                self.stdout.write(
                    f"The {name} was still busy after {STOP_GRACE:g} s: stopped at once "
                    f"({CUT_SHORT[name]})."
                )
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        self.stdout.write("The web server and the task cluster stopped; stopping the hosts…")
        call_command("simhosts", "stop")
        self.stdout.write(f"Stopped in {time.monotonic() - started:.1f} s.")
