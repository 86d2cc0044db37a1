"""A host's figures kept for its charts: the sync writes one point a host a minute; the
pruning loop turns each hour older than a day into one averaged point and drops hourly points
older than thirty days. So a host holds at most 1,510 minute points (a day, the hour in
progress at its start, and the pruning interval) and 720 hourly ones."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import transaction
from django.db.models import Avg, Max
from django.db.models.functions import TruncHour
from django.utils import timezone

from hosts.models import HostHourSample, HostSample

MINUTES_KEPT = timedelta(hours=24)
HOURS_KEPT = timedelta(days=30)
PRUNE_EVERY_S = 600

# The minute this process last wrote a point of each host: the sync reads a host every few
# seconds, and one statement a minute is enough.
_written: dict[int, datetime] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Figures:
    """What a report says of a host at one moment."""

    cpu_percent: float | None
    memory_given_mb: int
    memory_used_mb: int
    vms_running: int


def minute_of(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def record(host_id: int, figures: Figures, now: datetime) -> bool:
    """Keep ``figures`` as the host's point for the minute of ``now``, unless this process
    wrote that minute already (the first report of a minute stands for it; a second process
    writing the same minute, after a shard handover, replaces it). One statement; True if
    written."""
    minute = minute_of(now)
    with _lock:
        if _written.get(host_id) == minute:
            return False
        _written[host_id] = minute
    HostSample.objects.bulk_create(
        [HostSample(host_id=host_id, at=minute, **figures.__dict__)],
        update_conflicts=True,
        unique_fields=["host", "at"],
        update_fields=list(figures.__dict__),
    )
    return True


def forget() -> None:
    """Forget which minutes this process wrote (the next report of each host writes)."""
    with _lock:
        _written.clear()


class Point(NamedTuple):
    """One minute of a host, as its charts read it."""

    at: datetime
    cpu_percent: float | None
    memory_given_mb: int
    memory_used_mb: int
    vms_running: int


def last_day(host_id: int, now: datetime | None = None) -> list[Point]:
    """The host's minute points of the last 24 hours, oldest first (one query)."""
    now = now or timezone.now()
    rows = (
        HostSample.objects.filter(host_id=host_id, at__gt=now - MINUTES_KEPT, at__lte=now)
        .order_by("at")
        .values_list(*Point._fields)
    )
    return [Point(*row) for row in rows]


def prune(now: datetime | None = None) -> tuple[int, int]:
    """Average each whole hour of minute points older than a day into an hourly point and
    delete those minutes; delete hourly points older than thirty days. Returns (minute
    points, hourly points) deleted. An hour is averaged once, with all its minutes: the
    minutes of the hour the day's start falls in wait for the next run."""
    now = now or timezone.now()
    before = (now - MINUTES_KEPT).replace(minute=0, second=0, microsecond=0)
    with transaction.atomic():
        old = HostSample.objects.filter(at__lt=before)
        hours = (
            old.annotate(hour=TruncHour("at"))
            .values("host_id", "hour")
            .annotate(
                cpu=Avg("cpu_percent"),
                given=Avg("memory_given_mb"),
                used=Avg("memory_used_mb"),
                vms=Max("vms_running"),
            )
            .order_by()
        )
        HostHourSample.objects.bulk_create(
            [
                HostHourSample(
                    host_id=h["host_id"],
                    at=h["hour"],
                    cpu_percent=h["cpu"],
                    memory_given_mb=round(h["given"]),
                    memory_used_mb=round(h["used"]),
                    vms_running=h["vms"],
                )
                for h in hours
            ],
            update_conflicts=True,
            unique_fields=["host", "at"],
            update_fields=["cpu_percent", "memory_given_mb", "memory_used_mb", "vms_running"],
            batch_size=1000,
        )
        minutes, _ = old.delete()
    hours_gone, _ = HostHourSample.objects.filter(at__lt=now - HOURS_KEPT).delete()
    return minutes, hours_gone
