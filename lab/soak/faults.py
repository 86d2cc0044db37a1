"""The soak's faults, at random moments (on average one every ``every`` seconds), each logged
with when it began and ended. A fault of each kind runs at most once at a time; faults of
different kinds overlap, as real ones do.

After each fault a watcher measures its recovery: from the fault's end until what it broke
works again (``Recovery``); a fault not recovered within ``RECOVERY_BOUND_S`` is a violation.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import close_old_connections, connection
from django.db.utils import DatabaseError, InterfaceError
from django.utils import timezone

from hosts import driver
from hosts.models import Host, HostStatus, Job, JobState, VirtualMachine, VmStatus
from hosts.sync import status_for
from lab import simhosts
from lab.lightsim import driver as lightsim

RECOVERY_BOUND_S = 120
KINDS = (
    "kill -9 a task cluster",
    "freeze a web process",
    "kill a host's libvirt daemon",
    "a host answers slowly",
    "restart PostgreSQL",
    "change VMs behind Corral's back",
    "restart Redis",
)


class Skip(Exception):  # noqa: N818  (not an error: the fault cannot strike now)
    """The fault cannot strike now (the only task cluster left, a host already down)."""


@dataclass
class Fault:
    kind: str
    began: float  # time.monotonic()
    ended: float | None = None
    detail: str = ""
    recovery_s: float | None = None  # from ``ended`` (or ``began``: see Recovery.since_begin)
    recovered: bool | None = None


def db(read: Callable, default=None):
    """``read()`` on this thread's connection, or ``default`` while the database cannot be
    reached (the connection is dropped so that the next read opens a fresh one)."""
    try:
        close_old_connections()
        return read()
    except (DatabaseError, InterfaceError):
        with contextlib.suppress(Exception):
            connection.close()
        return default


class Faults(threading.Thread):
    """Injects faults until ``stop`` is set; ``log`` holds every fault."""

    def __init__(self, soak, every: float, seed: int, stop: threading.Event):
        super().__init__(name="soak-faults", daemon=True)
        self.soak = soak
        self.every = every
        self.rng = random.Random(seed)
        self.stop_event = stop
        self.lock = threading.Lock()
        self.log: list[Fault] = []
        self.busy: set[str] = set()
        self.threads: list[threading.Thread] = []
        methods = (
            self.kill_task_cluster,
            self.freeze_web,
            self.kill_host_daemon,
            self.slow_host,
            self.restart_postgres,
            self.behind_the_back,
            self.restart_redis,
        )
        self.kinds: dict[str, Callable[[Fault], Callable[[], bool] | None]] = dict(
            zip(KINDS, methods, strict=True)
        )

    def run(self) -> None:
        while not self.stop_event.wait(self.rng.expovariate(1 / self.every)):
            with self.lock:
                # Of the kinds not under way, one of those struck least so far: a short run
                # still meets every kind.
                free = [kind for kind in self.kinds if kind not in self.busy]
                if not free:
                    continue
                struck = {kind: sum(f.kind == kind for f in self.log) for kind in free}
                kind = self.rng.choice([k for k in free if struck[k] == min(struck.values())])
                self.busy.add(kind)
            thread = threading.Thread(target=self._run, args=(kind,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def wait(self) -> None:
        """Wait for every fault under way to end, its recovery to be measured and what it
        stopped to be started again (a task cluster's restart comes after its measure)."""
        while pending := [thread for thread in list(self.threads) if thread.is_alive()]:
            for thread in pending:
                thread.join()

    def _run(self, kind: str) -> None:
        fault = Fault(kind, time.monotonic())
        with self.lock:
            self.log.append(fault)
        try:
            recovered = self.kinds[kind](fault)
        except Skip:
            with self.lock:
                self.log.remove(fault)
                self.busy.discard(kind)
            return
        except Exception as exc:  # a fault the soak could not inject: reported
            fault.detail += f" (could not inject: {exc!r})"
            recovered = None
        finally:
            fault.ended = fault.ended or time.monotonic()
            with self.lock:
                self.busy.discard(kind)
        if recovered is not None:
            self._measure(fault, recovered)

    def _measure(self, fault: Fault, recovered: Callable[[], bool]) -> None:
        start = fault.ended
        deadline = start + RECOVERY_BOUND_S
        while time.monotonic() < deadline:
            if db(recovered, False):
                fault.recovery_s = time.monotonic() - start
                fault.recovered = True
                return
            time.sleep(0.25)
        fault.recovered = False
        self.soak.record.violation(
            "recovery",
            f"{fault.kind} ({fault.detail}) not recovered {RECOVERY_BOUND_S} s after it ended",
        )

    def _hold(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))

    def _freeze(self, pid: int, low: float, high: float) -> None:
        """SIGSTOP ``pid`` for ``low`` to ``high`` seconds, then SIGCONT."""
        os.kill(pid, signal.SIGSTOP)
        try:
            self._hold(low, high)
        finally:
            os.kill(pid, signal.SIGCONT)

    # -- the faults: each returns what says it is recovered (None: nothing to measure) -------

    def kill_task_cluster(self, fault: Fault):
        """kill -9 one task cluster; it is restarted 5 to 20 s later. Its hosts and jobs must be
        taken over by the other one: recovery counts from the kill, not from the restart."""
        alive = [c for c in self.soak.clusters if c.running()]
        if len(alive) < 2:
            raise Skip
        cluster = self.rng.choice(alive)
        dead = set(cluster.group())
        fault.detail = f"task cluster {self.soak.clusters.index(cluster) + 1}"
        cluster.kill()
        fault.ended = fault.began  # the takeover is measured from the kill

        def restart():
            self._hold(5, 20)
            if not self.soak.closed:  # the run was stopped meanwhile (Ctrl-C)
                cluster.start()

        restarting = threading.Thread(target=restart, daemon=True)
        self.threads.append(restarting)
        restarting.start()
        since = timezone.now()

        def taken_over() -> bool:
            workers = Job.objects.filter(state=JobState.RUNNING).values_list("worker", flat=True)
            on_dead = [
                w
                for w in workers
                if w.rpartition(":")[2].isdigit() and int(w.rpartition(":")[2]) in dead
            ]
            stale = Host.objects.filter(status=HostStatus.UP).exclude(last_seen_at__gte=since)
            synced = not stale.exists()
            return not on_dead and synced

        return taken_over

    def freeze_web(self, fault: Fault):
        workers = self.soak.web.workers()
        if not workers:
            raise Skip
        pid = self.rng.choice(workers)
        fault.detail = f"web worker {pid}"
        self._freeze(pid, 3, 10)
        return self.soak.api_answers

    def kill_host_daemon(self, fault: Fault):
        daemon = self.rng.choice(self.soak.fleet.daemons)
        pid = daemon.pid()
        if pid is None:
            raise Skip
        fault.detail = daemon.name
        os.kill(pid, signal.SIGKILL)
        self._hold(5, 15)
        simhosts.start(daemon)
        fault.ended = time.monotonic()
        return self._host_back(daemon.uri)

    def slow_host(self, fault: Fault):
        """A light host answers after seconds for a while, or a libvirt daemon stops answering
        for a few seconds (frozen, then going on as if nothing happened)."""
        if self.rng.random() < 0.5:
            uri = self.rng.choice(self.soak.fleet.light_uris)
            latency = self.rng.uniform(1500, 4000)
            fault.detail = f"{uri.split('?')[0]} answers after {latency:.0f} ms"
            lightsim.control(uri, "latency", latency_ms=latency)
            try:
                self._hold(10, 25)
            finally:
                lightsim.control(uri, "latency", latency_ms=0)
            return self._host_back(uri)
        daemon = self.rng.choice(self.soak.fleet.daemons)
        pid = daemon.pid()
        if pid is None:
            raise Skip
        fault.detail = f"{daemon.name} frozen"
        self._freeze(pid, 2, 8)
        return self._host_back(daemon.uri)

    def _host_back(self, uri: str):
        def back() -> bool:
            host = Host.objects.get(uri=uri)
            unknown = VirtualMachine.objects.filter(host=host, status=VmStatus.UNKNOWN)
            return host.status == HostStatus.UP and not unknown.exists()

        return back

    def restart_postgres(self, fault: Fault):
        fault.detail = "pg_ctl restart -m fast"
        self.soak.postgres.restart()
        fault.ended = time.monotonic()
        return self.soak.api_answers

    def restart_redis(self, fault: Fault):
        fault.detail = "kill -9, then started again (it kept nothing)"
        self.soak.redis.kill()
        self._hold(1, 6)
        self.soak.redis.start()
        fault.ended = time.monotonic()
        pending = set(
            db(
                lambda: list(
                    Job.objects.filter(state=JobState.PENDING).values_list("pk", flat=True)
                ),
                [],
            )
        )

        def ran() -> bool:
            return not Job.objects.filter(pk__in=pending, state=JobState.PENDING).exists()

        return ran

    def behind_the_back(self, fault: Fault):
        """Destroy, suspend or start 1 to 3 VMs on their hosts, not through Corral."""
        vms = db(
            lambda: list(
                VirtualMachine.objects.filter(host__isnull=False)
                .exclude(status__in=[VmStatus.UNKNOWN])
                .select_related("host")
                .order_by("?")[:3]
            ),
            [],
        )
        changed = []
        for vm in vms[: self.rng.randint(1, 3)]:
            action = self.rng.choice(["destroy", "suspend", "start"])
            uri, uuid = vm.host.uri, str(vm.uuid)
            try:
                if lightsim.handles(uri):
                    state = {"destroy": "shutoff", "suspend": "paused", "start": "running"}[action]
                    lightsim.control(uri, "set", uuid=uuid, state=state)
                else:
                    {"destroy": driver.power_off, "suspend": driver.suspend, "start": driver.start}[
                        action
                    ](uri, uuid)
            except driver.DriverError as exc:
                changed.append(f"{vm.name}: {action} refused by the host ({exc.message})")
                continue
            changed.append(f"{vm.name}: {action}")
        fault.detail = "; ".join(changed) or "no VM on a host"
        ids = [vm.pk for vm in vms]

        def agree() -> bool:
            for vm in VirtualMachine.objects.filter(pk__in=ids).select_related("host"):
                if vm.host is None or vm.status not in (
                    VmStatus.UP,
                    VmStatus.DOWN,
                    VmStatus.PAUSED,
                ):
                    continue
                try:
                    state = driver.domain_power_state(vm.host.uri, str(vm.uuid))
                except driver.DriverError:
                    return False
                if state is not None and status_for(state) != vm.status:
                    return False
            return True

        return agree
