"""Locks for periodic loops: one holder at a time across every task cluster and machine.

A holder renews its lock every tick; one that dies loses it when it expires. Conditional
UPDATEs make acquiring atomic on PostgreSQL and SQLite alike.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from project.models import LoopLock


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
