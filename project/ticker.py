"""The ticker: the django-q2 task that drives the periodic loops every app registers
(``project.loops``).

The ticker is one long-running task (CORRAL_TICKER_RUN_SECONDS, 15 s by default) held by a
loop lock, so exactly one runs across all task clusters; before it ends it queues its
successor; if its cluster died, the live clusters' syncers start a new one once its lock
expires (``revive_if_lost``), and a schedule every minute (plus every worker start) revives
the chain too. Each tick it runs the loops
the apps registered that are due: hosts' own reaper of jobs whose worker
died, the lease events, the balancers, the prestart monitor, the pruning of old events. When
interval loops last ran is kept in the database (loop locks that expire when the next run is
due), not in the ticker: a ticker lives 15 s, less than their intervals, and a fresh one must
neither skip them nor run them again too soon. Hosts are synced by every task cluster, each
its share (``hosts.sync.loop``), not by the ticker.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django_q.models import Schedule
from django_q.tasks import async_task

from project import loops
from project.workers import cluster_id, task_path, worker_name

logger = logging.getLogger(__name__)
TICKER_LOCK = "ticker"


def queue_tick() -> None:
    async_task(tick, task_name="corral-ticker")


class Ticker:
    def __init__(self) -> None:
        self.holder = f"{worker_name()}:{uuid.uuid4().hex[:8]}"
        self.ttl = max(10.0, 5 * settings.CORRAL_TICK_SECONDS)
        self.wake = threading.Event()
        self.running_loops: set[tuple[str, Any]] = set()
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="host-sync")

    def run(self, seconds: float) -> str:
        if not loops.acquire(TICKER_LOCK, self.holder, self.ttl):
            # A live ticker renews its lock every tick; take over only from a dead one.
            if not loops.abandoned(TICKER_LOCK, observe=2 * settings.CORRAL_TICK_SECONDS + 0.5):
                return "another ticker runs"
            if not loops.acquire(TICKER_LOCK, self.holder, self.ttl, wait=self.ttl):
                return "another ticker runs"
        ends = time.monotonic() + seconds
        parent = os.getppid()
        try:
            while time.monotonic() < ends:
                if os.getppid() != parent:
                    return "its task cluster stopped"
                if not loops.renew(TICKER_LOCK, self.holder, self.ttl):
                    return "lost the ticker lock"
                try:
                    self.tick()
                except Exception:
                    # One bad tick (a database hiccup, a host driver surprise) must not break
                    # the chain: the next tick tries again.
                    logger.exception("a tick failed")
                    close_old_connections()
                self.wake.wait(settings.CORRAL_TICK_SECONDS)
                self.wake.clear()
            return "done"
        finally:
            self.pool.shutdown(wait=True)
            loops.release(TICKER_LOCK, self.holder)

    def tick(self) -> None:
        # One read says which interval loops wait; a claim (a write) is tried only for one due.
        waiting = loops.not_due(loops.DUE)
        for loop in loops.registered():
            self.run_due(loop.name, waiting)

    def run_due(self, name: str, waiting: set[str] | None = None) -> list[Any]:
        """Run the loop ``name`` if it is due (every key of a keyed loop that is); returns the
        keys started (``[None]`` for a loop without keys, ``[]`` when nothing was due)."""
        loop = loops.get(name)
        if loop.every is None:
            self._run(loop, None)
            return [None]
        waiting = loops.not_due(loop.due_name()) if waiting is None else waiting
        started = []
        for key in loop.keys() if loop.keys is not None else [None]:
            run = (loop.name, key)
            if loop.due_name(key) in waiting or run in self.running_loops:
                continue
            if loops.claim_run(loop.due_name(key), loop.every()):
                started.append(key)
                if loop.threaded:
                    self.running_loops.add(run)
                    self.pool.submit(self._run_threaded, loop, key)
                else:
                    self._run(loop, key)
        return started

    def _run(self, loop: loops.Loop, key: Any) -> None:
        try:
            loop.run() if key is None else loop.run(key)
        except Exception:
            logger.exception("loop %s%s failed", loop.name, "" if key is None else f" ({key})")

    def _run_threaded(self, loop: loops.Loop, key: Any) -> None:
        try:
            close_old_connections()
            self._run(loop, key)
        finally:
            self.running_loops.discard((loop.name, key))
            connection.close()


def tick(seconds: float | None = None) -> str:
    """The ticker task: run the periodic loops for a while, then queue the next one."""
    seconds = settings.CORRAL_TICKER_RUN_SECONDS if seconds is None else seconds
    outcome = Ticker().run(seconds)
    if outcome == "done":
        queue_tick()
    return outcome


def ensure_schedules(**kwargs) -> None:
    """The ticker's safety net: a schedule every minute revives it if its chain broke
    (``post_migrate``)."""
    Schedule.objects.update_or_create(
        name="corral-ticker",
        defaults={
            "func": task_path(tick),
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "repeats": -1,
        },
    )


def revive_if_lost() -> bool:
    """Queue a ticker when none holds the ticker's lock: its holder died (its task cluster was
    killed) and the chain it would have continued is broken. Every task cluster's syncer asks
    four times a sync lease (``hosts.sync.loop``), so the loops — the reaper of a dead
    cluster's jobs among them — go on within seconds of the lock expiring, not at the next
    minutely schedule or when the dead cluster comes back. True if it queued one.

    Between two links of a live chain the lock is briefly free: the revival is claimed for a
    ticker's lifetime, and a ticker that finds the lock held ends at once, so a spare one
    costs nothing."""
    from django.utils import timezone

    from project.models import LoopLock
    from project.workers import queue_task

    if LoopLock.objects.filter(name=TICKER_LOCK, expires_at__gte=timezone.now()).exists():
        return False
    ttl = max(10.0, 5 * settings.CORRAL_TICK_SECONDS)
    if not loops.acquire(f"{TICKER_LOCK}-lost", f"{worker_name()}:{uuid.uuid4().hex[:8]}", ttl=ttl):
        return False
    return queue_task(tick, task_name="corral-ticker")


def revive_ticker(sender=None, proc_name: str = "", **kwargs) -> None:
    """A task worker started (a cluster started or restarted): make sure a ticker runs
    (django-q2's ``post_spawn``)."""
    try:
        # Every worker of a starting cluster gets here; one queued ticker is enough. The lock
        # is the cluster's own (its workers share the sentinel as parent): a cluster started
        # right after another one died must not wait for the dead one's lock to expire.
        if loops.acquire(f"{TICKER_LOCK}-revival-{cluster_id()}", proc_name or "worker", ttl=15):
            loops.forget_expired(f"{TICKER_LOCK}-revival-")
            queue_tick()
    except Exception:  # the broker may not be reachable yet; the schedule catches up
        logger.exception("could not queue the ticker")
