"""The sync of hosts, shared out among task clusters (``hosts.sync.shard``).

Every worker of a task cluster starts a syncer thread when it starts (django-q2's
``post_spawn``); one per cluster wins the cluster's heartbeat row and syncs, the others wait
and take over if its worker dies. Four times a lease the syncer renews its heartbeat and
holds its fair share of the hosts; each round (``CORRAL_TICK_SECONDS``) it syncs each host it
holds every ``CORRAL_SYNC_INTERVAL`` seconds — at once when a libvirt lifecycle event arrives — on
``CORRAL_SYNC_THREADS`` threads. The hosts it found Up get their ``last_seen_at`` in one write
every half interval; a host whose report did not change writes nothing of its own. What the
guests on those hosts show (``hosts.guests.guestinfo``) is read every ``CORRAL_GUEST_INFO_INTERVAL``
seconds by the same syncer, on threads of its own: the per-host work follows the hosts' leases
and grows with the task clusters, as the sync does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import connection

from hosts import sync
from hosts.driver import LifecycleListener
from hosts.guests import guestinfo
from hosts.models import HostStatus
from hosts.sync import shard
from project import loops, ticker
from project.workers import cluster_id

logger = logging.getLogger(__name__)


def lease_seconds() -> float:
    """How long a claim on a host (and a member's heartbeat) lasts without renewal."""
    return max(settings.CORRAL_SYNC_INTERVAL, 3 * settings.CORRAL_TICK_SECONDS)


class Syncer:
    """Syncs the hosts a member (a task cluster) holds; ``run`` until told to stop."""

    def __init__(self, member: str, holder: str | None = None) -> None:
        self.member = member
        self.holder = holder or f"{member}:{os.getpid()}:{threading.get_ident()}"
        self.threads = max(1, settings.CORRAL_SYNC_THREADS)  # of each pool
        self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="host-sync")
        self.guest_pool = ThreadPoolExecutor(
            max_workers=self.threads, thread_name_prefix="guest-info"
        )
        # Watching the held hosts for lifecycle events opens their connections: on a thread of
        # its own, never holding up the heartbeat (twenty SSH logins outlast a lease).
        self.watcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="host-events")
        self.watching: Future | None = None
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.urgent: set[str] = set()
        self.answered: set[int] = set()
        self.last_sync: dict[int, float] = {}
        self.in_flight: set[int] = set()
        # Held hosts whose last sync found them Up with VMs of Corral's on them.
        self.with_guests: set[int] = set()
        self.last_guest_info: dict[int, float] = {}
        self.guests_in_flight: set[int] = set()
        self.last_flush = time.monotonic()
        self.holding = False
        self.held: dict[int, str] = {}
        self.last_claim = -1e9
        self.syncs = 0

    def on_lifecycle_event(self, uri: str, domain_uuid: str, event: str) -> None:
        with self.lock:
            self.urgent.add(uri)
        self.wake.set()

    def run(self, keep_going=lambda: True) -> None:
        listener = LifecycleListener(self.on_lifecycle_event)
        try:
            while keep_going() and not self.stopping.is_set():
                working = False
                try:
                    loops.reuse_connection()
                    working = self.round(listener)
                except Exception:
                    # A database hiccup must not end the sync: the next round tries again.
                    logger.exception("a sync round failed")
                # A waiting syncer (another worker of the cluster syncs) looks again later.
                pause = settings.CORRAL_TICK_SECONDS if working else lease_seconds() / 2
                self.wake.wait(pause)
                self.wake.clear()
        finally:
            self.stop(listener)

    def stop(self, listener: LifecycleListener | None = None) -> None:
        self.stopping.set()
        self.watcher.shutdown(wait=True)
        if listener is not None:
            listener.close()
        for pool in (self.pool, self.guest_pool):
            _close_connections(pool, self.threads)
            pool.shutdown(wait=True)
        try:
            if self.holding:
                shard.retire(self.member, self.holder)
        except Exception:
            logger.exception("could not hand the hosts back")
        finally:
            connection.close()

    def round(self, listener: LifecycleListener | None = None) -> bool:
        """One round: heartbeat, claims, the syncs that are due; False while another process
        of the member syncs."""
        lease = lease_seconds()
        now = time.monotonic()
        # Heartbeat and claims four times a lease: often enough that a dead cluster's hosts
        # are taken within two intervals, seldom enough to cost little on every tick.
        if now - self.last_claim >= lease / 4:
            self.last_claim = now
            self.holding = shard.announce(self.member, self.holder, lease)
            self.held = shard.claim_share(self.member, lease) if self.holding else {}
            if listener is not None and (self.watching is None or self.watching.done()):
                self.watching = self.watcher.submit(_watch, listener, list(self.held.values()))
            if self.holding:
                # A dead cluster's hosts are taken above; its ticker, here.
                ticker.revive_if_lost()
        if not self.holding:
            return False
        held = self.held
        with self.lock:
            urgent, self.urgent = self.urgent, set()
            for known in (self.last_sync, self.last_guest_info):
                for host_id in list(known):
                    if host_id not in held:
                        known.pop(host_id)
            self.with_guests &= held.keys()
            for host_id, uri in held.items():
                due = now - self.last_sync.get(host_id, -1e9) >= settings.CORRAL_SYNC_INTERVAL
                if (due or uri in urgent) and host_id not in self.in_flight:
                    self.in_flight.add(host_id)
                    self.last_sync[host_id] = now
                    self.pool.submit(self._sync, host_id)
            for host_id in self.with_guests - self.guests_in_flight:
                if (
                    now - self.last_guest_info.get(host_id, -1e9)
                    >= settings.CORRAL_GUEST_INFO_INTERVAL
                ):
                    self.guests_in_flight.add(host_id)
                    self.last_guest_info[host_id] = now
                    self.guest_pool.submit(self._guest_info, host_id)
        if now - self.last_flush >= settings.CORRAL_SYNC_INTERVAL / 2:
            self.last_flush = now
            with self.lock:
                answered, self.answered = self.answered, set()
            shard.mark_seen(self.member, sorted(answered))
            loops.forget_expired(shard.MEMBER)
        return True

    def _sync(self, host_id: int) -> None:
        try:
            loops.reuse_connection()
            result = sync.sync_host(host_id, owner=self.member)
            up = not result.skipped and result.host_status == HostStatus.UP
            with self.lock:
                if up:
                    self.answered.add(host_id)
                    self.syncs += 1
                if up and result.guests:
                    self.with_guests.add(host_id)
                else:
                    self.with_guests.discard(host_id)
        except Exception:
            logger.exception("sync of host %s failed", host_id)
        finally:
            with self.lock:
                self.in_flight.discard(host_id)

    def _guest_info(self, host_id: int) -> None:
        try:
            loops.reuse_connection()
            guestinfo.refresh_host(host_id)
        except Exception:
            logger.exception("guest info of host %s not read", host_id)
        finally:
            with self.lock:
                self.guests_in_flight.discard(host_id)


def _watch(listener: LifecycleListener, uris: list[str]) -> None:
    try:
        listener.watch(uris)
    except Exception:
        logger.exception("the hosts' lifecycle events are not watched")


def _close_connections(pool: ThreadPoolExecutor, threads: int) -> None:
    """Close the database connection of each of the pool's ``threads`` (each holds one)."""
    everyone = threading.Barrier(threads)

    def close() -> None:
        connection.close()
        # Held until every thread took one: no thread closes twice while another closes none.
        with contextlib.suppress(threading.BrokenBarrierError):
            everyone.wait(timeout=30)

    for _ in range(threads):
        pool.submit(close)


def start_in_worker(sender=None, **kwargs) -> None:
    """A task worker started: run a syncer thread for its cluster (django-q2's ``post_spawn``).

    The thread ends with the worker, or when the cluster's sentinel is gone.
    """
    parent = os.getppid()
    syncer = Syncer(cluster_id())
    thread = threading.Thread(
        target=syncer.run,
        args=(lambda: os.getppid() == parent,),
        name="corral-syncer",
        daemon=True,
    )
    thread.start()
