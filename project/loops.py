"""Periodic loops: their registry, and locks that give each one holder at a time across every
task cluster and machine.

Each app registers its loops (``register`` from its ``AppConfig.ready()``); the ticker in
``project.ticker`` runs them. A holder renews its lock every tick; one that dies loses it when it
expires. Conditional UPDATEs make acquiring atomic on PostgreSQL and SQLite alike.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from project.models import LoopLock


def reuse_connection() -> None:
    """Before a unit of work on a loop's long-lived thread (a syncer's, its pools'): keep the
    thread's database connection from one unit to the next, as it is.

    ``close_old_connections`` closes a connection older than ``CONN_MAX_AGE`` (0 on SQLite:
    every unit opened one) and has a kept one checked with a query before its next use
    (``CONN_HEALTH_CHECKS``): at 1,000 light hosts these cost a task cluster a third of its
    CPU on SQLite and a fifth on PostgreSQL (docs/benchmarks.md, "Sync at scale"). Here a
    connection is closed only after a query on it failed (or a transaction was left open):
    after a database restart each thread loses one unit of work, and the next opens a new
    connection. Such threads are few and each holds one connection for its life.
    """
    if connection.connection is None:
        return
    if connection.errors_occurred or not connection.get_autocommit():
        connection.close()
    else:
        connection.close_at = None  # never obsolete: this thread keeps it


def acquire(name: str, holder: str, ttl: float, wait: float = 0.0) -> bool:
    """Take the lock if it is free, expired or ours; wait up to ``wait`` seconds for it."""
    deadline = time.monotonic() + wait
    while True:
        if _take(name, holder, ttl):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(0.5, max(0.05, deadline - time.monotonic())))


def _take(name: str, holder: str, ttl: float) -> bool:
    now = timezone.now()
    expires = now + timedelta(seconds=ttl)
    taken = LoopLock.objects.filter(Q(name=name) & (Q(expires_at__lt=now) | Q(holder=holder)))
    if taken.update(holder=holder, expires_at=expires):
        return True
    try:
        with transaction.atomic():
            LoopLock.objects.create(name=name, holder=holder, expires_at=expires)
        return True
    except IntegrityError:
        return False


def claim_run(name: str, every: float) -> bool:
    """Claim this run of a loop that runs every ``every`` seconds: True for one caller per
    interval across every ticker, task cluster and machine; a loop that never ran is due at once.

    The row's expiry is when the next run is due, so the schedule outlives any one ticker.
    """
    return _take(name, f"run-{uuid.uuid4().hex[:12]}", every)


def not_due(prefix: str) -> set[str]:
    """The loops (names starting with ``prefix``) that ran and are not due again yet."""
    waiting = LoopLock.objects.filter(name__startswith=prefix, expires_at__gte=timezone.now())
    return set(waiting.values_list("name", flat=True))


def abandoned(name: str, observe: float) -> bool:
    """Whether the lock's holder has stopped renewing it (watched for ``observe`` seconds)."""
    before = LoopLock.objects.filter(name=name).values_list("expires_at", flat=True).first()
    if before is None:
        return True
    time.sleep(observe)
    after = LoopLock.objects.filter(name=name).values_list("expires_at", flat=True).first()
    return after is None or after == before


def renew(name: str, holder: str, ttl: float) -> bool:
    """Extend our lock; False if it expired and someone else took it."""
    expires = timezone.now() + timedelta(seconds=ttl)
    return bool(LoopLock.objects.filter(name=name, holder=holder).update(expires_at=expires))


def release(name: str, holder: str) -> None:
    LoopLock.objects.filter(name=name, holder=holder).delete()


def forget_expired(prefix: str) -> int:
    """Delete expired locks whose name starts with ``prefix`` (locks named per holder)."""
    deleted, _ = LoopLock.objects.filter(
        name__startswith=prefix, expires_at__lt=timezone.now()
    ).delete()
    return deleted


# -- the periodic loops the ticker runs ----------------------------------------------------------

DUE = "due-"


@dataclass(frozen=True)
class Loop:
    """A periodic loop, run by the ticker (``project.ticker``) across every task cluster.

    ``every`` gives the seconds between runs (read at each tick, so settings may change);
    without it the loop runs on every tick, inline. With ``keys``, each key (a cluster id, say)
    is a run of its own, due on its own and never run twice at once; ``run`` then takes the
    key. A run that is due is claimed in the database (``claim_run``), so a short-lived ticker
    neither skips it nor runs it again too soon. ``threaded`` runs go on the ticker's thread
    pool (with their own database connection), the others inline.
    """

    name: str
    run: Callable[..., Any]
    every: Callable[[], float] | None = None
    keys: Callable[[], Iterable[Any]] | None = None
    threaded: bool = True

    def due_name(self, key: Any = None) -> str:
        """The name of the lock that says when this run is due next."""
        return f"{DUE}{self.name}" if key is None else f"{DUE}{self.name}-{key}"


_loops: dict[str, Loop] = {}


def register(
    name: str,
    run: Callable[..., Any],
    *,
    every: Callable[[], float] | None = None,
    keys: Callable[[], Iterable[Any]] | None = None,
    threaded: bool = True,
) -> None:
    """Have the ticker run ``run`` periodically (called from an app's ``AppConfig.ready()``)."""
    _loops[name] = Loop(name, run, every, keys, threaded if every is not None else False)


def registered() -> list[Loop]:
    """Every loop: those run on every tick first, then the interval loops, each in the order
    their apps registered them."""
    loops = list(_loops.values())
    return [loop for loop in loops if loop.every is None] + [
        loop for loop in loops if loop.every is not None
    ]


def get(name: str) -> Loop:
    return _loops[name]
