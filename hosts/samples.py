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
from typing import NamedTuple, Protocol

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


def _rows(model: type[models.Model], point: type[NamedTuple], start, now, **owner) -> list:
    rows = (
        model.objects.filter(**owner, at__gt=start, at__lte=now)
        .order_by("at")
        .values_list(*point._fields)
    )
    return [point(*row) for row in rows]


class Span(Protocol):
    """What reading points needs of a span (``hosts.spans.Span``, which draws on this module's
    lengths): how far back, and whether one point an hour."""

    length: timedelta
    hourly: bool


def points_of(kept: Kept, point: type[NamedTuple], span: Span, now: datetime, **owner) -> list:
    """One owner's points of ``span`` before ``now`` (a host's, a VM's), as ``point`` tuples,
    oldest first: its minute points (one query), or for an ``hourly`` span one point an hour,
    its hourly points and its minutes summed up per hour (``per_hour``, two queries)."""
    start = now - span.length
    minutes = _rows(kept.minutes, point, start, now, **owner)
    if not span.hourly:
        return minutes
    return per_hour(kept, _rows(kept.hours, point, start, now, **owner), minutes)


def per_hour(kept: Kept, hours: list[NamedTuple], minutes: list[NamedTuple]) -> list:
    """``hours`` (hourly points) and ``minutes`` (minute points not pruned yet: the last day's
    and the hour or so waiting for the pruning), one point an hour at its start, oldest first:
    the minutes of an hour summed up as the pruning will (``kept.figures``; an hour in both
    is its minutes')."""
    here = timezone.get_current_timezone()  # the pruning's hours are this time zone's
    grouped: dict[datetime, list[NamedTuple]] = {}
    for point in minutes:
        hour = point.at.astimezone(here).replace(minute=0, second=0, microsecond=0)
        grouped.setdefault(hour, []).append(point)
    points = {point.at: point for point in hours}
    for hour, group in grouped.items():
        names, columns = group[0]._fields, list(zip(*group, strict=True))  # at, each figure
        figures = zip(names[1:], columns[1:], strict=True)
        points[hour] = type(group[0])(hour, *(kept.summed(name, v) for name, v in figures))
    return [points[at] for at in sorted(points)]


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

    def summed(self, name: str, values) -> float | None:
        """The figure ``name`` of an hour whose minutes had ``values``, as the pruning sums it
        up (None for none known)."""
        known = [v for v in values if v is not None]
        if not known:
            return None
        return max(known) if self.figures[name] is Max else sum(known) / len(known)

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


HOSTS_KEPT = Kept(
    HostSample,
    HostHourSample,
    "host_id",
    {"cpu_percent": Avg, "memory_given_mb": Avg, "memory_used_mb": Avg, "vms_running": Max},
)
VMS_KEPT = Kept(
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
)
CLUSTERS_KEPT = Kept(
    ClusterSample,
    ClusterHourSample,
    "cluster_id",
    {
        field.name: Avg
        for field in ClusterSample._meta.concrete_fields
        if field.name not in ("id", "cluster", "at")
    },
)
KEPT = [HOSTS_KEPT, VMS_KEPT, CLUSTERS_KEPT]
