"""django-q2 entry points for hosts: run a job, and the ticker that drives the periodic loops.

The ticker is one long-running task (CORRAL_TICKER_RUN_SECONDS, 15 s by default) held by a
loop lock, so exactly one runs across all task clusters; before it ends it queues its
successor, and a schedule every minute
(plus every worker start) revives the chain if its cluster died. Each tick it syncs the hosts
that are due (every CORRAL_SYNC_INTERVAL seconds, or at once after a libvirt lifecycle event),
reaps jobs whose worker died, and runs the loops that are due: the balancers, the prestart
monitor and the pruning of old events. When those last ran is kept in the database (loop
locks that expire when the next run is due), not in the ticker: a ticker lives 15 s, less
than their intervals, and a fresh one must neither skip them nor run them again too soon.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connection

from hosts import jobs, sync
from hosts.driver import LifecycleListener
from hosts.models import Host, HostStatus
from project import events, loops

logger = logging.getLogger(__name__)
TICKER_LOCK = "ticker"
PRUNE_EVERY_S = 600
# Names of the loop locks that say when each loop is due next.
DUE = "due-"
BALANCE_DUE = f"{DUE}balance-"
POOL_MONITOR_DUE = f"{DUE}pool-monitor"
PRUNE_DUE = f"{DUE}prune-events"


def run_job(job_id: int) -> str:
    close_old_connections()
    return jobs.run(job_id)


def sync_host(host_id: int) -> dict:
    """One sync of one host (also run by the ticker); returns what it did."""
    close_old_connections()
    try:
        result = sync.sync_host(host_id)
    finally:
        connection.close()
    return {"host_status": result.host_status, "written": result.vms_written}


def queue_tick() -> None:
    from django_q.tasks import async_task

    async_task("hosts.tasks.tick", task_name="corral-ticker")


class Ticker:
    def __init__(self) -> None:
        self.holder = f"{jobs.worker_name()}:{uuid.uuid4().hex[:8]}"
        self.ttl = max(10.0, 5 * settings.CORRAL_TICK_SECONDS)
        self.wake = threading.Event()
        self.urgent: set[str] = set()
        self.urgent_lock = threading.Lock()
        self.last_sync: dict[int, float] = {}
        self.in_flight: set[int] = set()
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="host-sync")

    def on_lifecycle_event(self, uri: str, domain_uuid: str, event: str) -> None:
        with self.urgent_lock:
            self.urgent.add(uri)
        self.wake.set()

    def run(self, seconds: float) -> str:
        if not loops.acquire(TICKER_LOCK, self.holder, self.ttl):
            # A live ticker renews its lock every tick; take over only from a dead one.
            if not loops.abandoned(TICKER_LOCK, observe=2 * settings.CORRAL_TICK_SECONDS + 0.5):
                return "another ticker runs"
            if not loops.acquire(TICKER_LOCK, self.holder, self.ttl, wait=self.ttl):
                return "another ticker runs"
        listener = LifecycleListener(self.on_lifecycle_event)
        ends = time.monotonic() + seconds
        parent = os.getppid()
        try:
            while time.monotonic() < ends:
                if os.getppid() != parent:
                    return "its task cluster stopped"
                if not loops.renew(TICKER_LOCK, self.holder, self.ttl):
                    return "lost the ticker lock"
                try:
                    self.tick(listener)
                except Exception:
                    # One bad tick (a database hiccup, a host driver surprise) must not break
                    # the chain: the next tick tries again.
                    logger.exception("a tick failed")
                    close_old_connections()
                self.wake.wait(settings.CORRAL_TICK_SECONDS)
                self.wake.clear()
            return "done"
        finally:
            listener.close()
            self.pool.shutdown(wait=True)
            loops.release(TICKER_LOCK, self.holder)

    def tick(self, listener: LifecycleListener) -> None:
        hosts = list(Host.objects.exclude(status=HostStatus.MAINTENANCE).values_list("pk", "uri"))
        listener.watch(uri for _, uri in hosts)
        with self.urgent_lock:
            urgent, self.urgent = self.urgent, set()
        now = time.monotonic()
        for host_id, uri in hosts:
            due = now - self.last_sync.get(host_id, 0) >= settings.CORRAL_SYNC_INTERVAL
            if (due or uri in urgent) and host_id not in self.in_flight:
                self.in_flight.add(host_id)
                self.last_sync[host_id] = now
                self.pool.submit(self._sync, host_id)
        jobs.reap()
        self.lease_events()
        # One read says which loops wait; a claim (a write) is tried only for one that is due.
        waiting = loops.not_due(DUE)
        self.balance_due(waiting)
        self.monitor_pools_due(waiting)
        if PRUNE_DUE not in waiting and loops.claim_run(PRUNE_DUE, PRUNE_EVERY_S):
            events.prune()
            loops.forget_expired(BALANCE_DUE)  # clusters deleted since

    def balance_due(self, waiting: set[str] | None = None) -> list[int]:
        """Each cluster's balancer, every CORRAL_BALANCE_INTERVAL seconds (one never run is due
        at once); returns the clusters whose balancer it started."""
        from hosts.models import Cluster

        waiting = loops.not_due(BALANCE_DUE) if waiting is None else waiting
        started = []
        for cluster_id in Cluster.objects.values_list("pk", flat=True):
            key = -cluster_id  # clusters share the in-flight set with hosts, kept apart by sign
            name = f"{BALANCE_DUE}{cluster_id}"
            if name in waiting or key in self.in_flight:
                continue
            if loops.claim_run(name, settings.CORRAL_BALANCE_INTERVAL):
                self.in_flight.add(key)
                self.pool.submit(self._balance, cluster_id)
                started.append(cluster_id)
        return started

    def lease_events(self) -> None:
        """Start and end leases on time (and catch up on any missed while down)."""
        from leases.services import run_due_events

        try:
            run_due_events()
        except Exception:
            logger.exception("lease events failed")

    def monitor_pools_due(self, waiting: set[str] | None = None) -> bool:
        """The pools' prestart monitor, every VMPOOL_MONITOR_INTERVAL seconds."""
        waiting = loops.not_due(POOL_MONITOR_DUE) if waiting is None else waiting
        if POOL_MONITOR_DUE in waiting:
            return False
        if not loops.claim_run(POOL_MONITOR_DUE, settings.VMPOOL_MONITOR_INTERVAL):
            return False
        self.pool.submit(self._monitor_pools)
        return True

    def _monitor_pools(self) -> None:
        from pools.services import monitor_all

        try:
            close_old_connections()
            monitor_all()
        except Exception:
            logger.exception("the prestart monitor failed")
        finally:
            connection.close()

    def _balance(self, cluster_id: int) -> None:
        from scheduling.balancer import balance_cluster

        try:
            close_old_connections()
            outcome = balance_cluster(cluster_id)
            if outcome.get("action") == "migrate":
                logger.info("balancer: %s", outcome)
        except Exception:
            logger.exception("balancing cluster %s failed", cluster_id)
        finally:
            self.in_flight.discard(-cluster_id)
            connection.close()

    def _sync(self, host_id: int) -> None:
        try:
            sync_host(host_id)
        except Exception:
            logger.exception("sync of host %s failed", host_id)
        finally:
            self.in_flight.discard(host_id)


def tick(seconds: float | None = None) -> str:
    """The ticker task: run the periodic loops for a while, then queue the next one."""
    seconds = settings.CORRAL_TICKER_RUN_SECONDS if seconds is None else seconds
    outcome = Ticker().run(seconds)
    if outcome == "done":
        queue_tick()
    return outcome
