"""A host's figures kept for its charts: the sync writes one point a host a minute; the
pruning loop turns each hour older than a day into one averaged point and drops hourly points
older than thirty days, of hosts, of VMs (``hosts.vm_samples``) and of clusters
(``hosts.cluster_samples``). So a host or a VM holds at
most 1,510 minute points (a day, the hour in progress at its start, and the pruning interval)
and 720 hourly ones."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import models, transaction
from django.db.models import Aggregate, Avg, Max
from django.db.models.functions import TruncHour
from django.utils import timezone

from hosts.models import (
    ClusterHourSample,
    ClusterSample,
    HostHourSample,
    HostSample,
    VmHourSample,
    VmSample,
)

MINUTES_KEPT = timedelta(hours=24)
HOURS_KEPT = timedelta(days=30)
PRUNE_EVERY_S = 600


class EachMinute:
    """Which minute this process last wrote the points of each host: the sync reads a host
    every few seconds, and one write a minute is enough."""

    def __init__(self) -> None:
        self._written: dict[int, datetime] = {}
        self._lock = threading.Lock()

    def due(self, host_id: int, now: datetime) -> bool:
        """Whether the minute of ``now`` is still to be written for the host."""
        with self._lock:
            return self._written.get(host_id) != minute_of(now)

    def claim(self, host_id: int, now: datetime) -> bool:
        """Take the minute of ``now`` for the host: False if it was written already."""
        minute = minute_of(now)
        with self._lock:
            if self._written.get(host_id) == minute:
                return False
            self._written[host_id] = minute
            return True

    def forget(self) -> None:
        with self._lock:
            self._written.clear()


_hosts_written = EachMinute()


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
    if not _hosts_written.claim(host_id, now):
        return False
    HostSample.objects.bulk_create(
        [HostSample(host_id=host_id, at=minute_of(now), **figures.__dict__)],
        update_conflicts=True,
        unique_fields=["host", "at"],
        update_fields=list(figures.__dict__),
    )
    return True


def forget() -> None:
    """Forget which minutes this process wrote (the next report of each host writes)."""
    _hosts_written.forget()


class Point(NamedTuple):
    """One minute of a host, as its charts read it."""

    at: datetime
    cpu_percent: float | None
    memory_given_mb: int
    memory_used_mb: int
    vms_running: int


def day_of(minutes: type[models.Model], point: type[NamedTuple], now: datetime, **owner) -> list:
    """One owner's minute points of the last 24 hours in ``minutes`` (a host's, a VM's), as
    ``point`` tuples, oldest first (one query)."""
    rows = (
        minutes.objects.filter(**owner, at__gt=now - MINUTES_KEPT, at__lte=now)
        .order_by("at")
        .values_list(*point._fields)
    )
    return [point(*row) for row in rows]


def last_day(host_id: int, now: datetime | None = None) -> list[Point]:
    """The host's minute points of the last 24 hours, oldest first (one query)."""
    return day_of(HostSample, Point, now or timezone.now(), host_id=host_id)


@dataclass(frozen=True)
class Kept:
    """A pair of tables of points (a minute's, an hour's) of one kind of owner, and how an
    hour's point sums up its minutes (``Avg`` or ``Max`` of each figure)."""

    minutes: type[models.Model]
    hours: type[models.Model]
    owner: str
    figures: dict[str, type[Aggregate]]

    def prune(self, before: datetime, gone: datetime) -> tuple[int, int]:
        """Average the whole hours of minutes before ``before``, delete those minutes, delete
        the hours before ``gone``."""
        with transaction.atomic():
            old = self.minutes.objects.filter(at__lt=before)
            hours = (
                old.annotate(hour=TruncHour("at"))
                .values(self.owner, "hour")
                .annotate(**{f"_{name}": how(name) for name, how in self.figures.items()})
                .order_by()
            )
            self.hours.objects.bulk_create(
                [
                    self.hours(
                        **{self.owner: h[self.owner], "at": h["hour"]},
                        **{name: self._kept(name, h[f"_{name}"]) for name in self.figures},
                    )
                    for h in hours
                ],
                update_conflicts=True,
                unique_fields=[self.owner.removesuffix("_id"), "at"],
                update_fields=list(self.figures),
                batch_size=1000,
            )
            minutes, _ = old.delete()
        hours_gone, _ = self.hours.objects.filter(at__lt=gone).delete()
        return minutes, hours_gone

    def _kept(self, name: str, value):
        whole = not isinstance(self.hours._meta.get_field(name), models.FloatField)
        return round(value) if whole and value is not None else value


def prune(now: datetime | None = None) -> tuple[int, int]:
    """Average each whole hour of minute points (of hosts, VMs and clusters) older than a day
    into an hourly point and delete those minutes; delete hourly points older than thirty days.
    Returns (minute points, hourly points) deleted. An hour is averaged once, with all its
    minutes: the minutes of the hour the day's start falls in wait for the next run."""
    now = now or timezone.now()
    before = (now - MINUTES_KEPT).replace(minute=0, second=0, microsecond=0)
    pruned = [kept.prune(before, now - HOURS_KEPT) for kept in KEPT]
    return sum(m for m, _ in pruned), sum(h for _, h in pruned)


KEPT = [
    Kept(
        HostSample,
        HostHourSample,
        "host_id",
        {"cpu_percent": Avg, "memory_given_mb": Avg, "memory_used_mb": Avg, "vms_running": Max},
    ),
    Kept(
        VmSample,
        VmHourSample,
        "vm_id",
        {
            "cpu_percent": Avg,
            "memory_used_mb": Avg,
            "disk_read_bps": Avg,
            "disk_write_bps": Avg,
            "net_rx_bps": Avg,
            "net_tx_bps": Avg,
        },
    ),
    Kept(
        ClusterSample,
        ClusterHourSample,
        "cluster_id",
        {
            field.name: Avg
            for field in ClusterSample._meta.concrete_fields
            if field.name not in ("id", "cluster", "at")
        },
    ),
]
