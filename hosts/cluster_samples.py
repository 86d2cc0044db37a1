"""Each cluster's figures through the day, for the cluster's and the dashboard's charts: its
hosts' load (CPU in use on average, memory given to VMs against its usable hosts' memory), its
VMs by state and its pools' VMs free and taken.

A loop (``census``, every minute) writes one point a cluster, from its hosts and VMs as they
stand: three statements whatever the number of hosts and VMs. The pruning loop of
hosts and VMs (``hosts.samples.prune``) turns each hour older than a day into one averaged
point and drops hourly points older than thirty days: a cluster holds at most 1,510 minute
points and 720 hourly ones.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.db.models import Avg, Count, Q, Sum
from django.utils import timezone

from hosts import samples
from hosts.models import (
    HOLDING_STATUSES,
    STATIONARY_STATUSES,
    ClusterHourSample,
    ClusterSample,
    Host,
    HostStatus,
    VirtualMachine,
    VmStatus,
)
from hosts.spans import Span

CENSUS_EVERY_S = 60
FIGURES = (
    "cpu_percent",
    "memory_given_mb",
    "memory_capacity_mb",
    "vms_up",
    "vms_paused",
    "vms_down",
    "vms_changing",
    "vms_unknown",
    "pool_vms_free",
    "pool_vms_taken",
)
_CHANGING = [status for status in VmStatus.values if status not in STATIONARY_STATUSES]


class Point(NamedTuple):
    """One minute of one cluster (or of several, added up), as the charts read it."""

    at: datetime
    cpu_percent: float | None
    memory_given_mb: int
    memory_capacity_mb: int
    vms_up: int
    vms_paused: int
    vms_down: int
    vms_changing: int
    vms_unknown: int
    pool_vms_free: int
    pool_vms_taken: int


def census(now: datetime | None = None) -> int:
    """Write every cluster's point for the minute of ``now``, from its hosts and VMs as they
    stand (the CPU in use each host's sync read last); how many were written. A second run in
    the same minute writes the same points again."""
    now = now or timezone.now()
    hosts = {
        row["cluster"]: row
        for row in Host.objects.values("cluster")
        .annotate(
            cpu=Avg("cpu_usage_percent", filter=Q(status=HostStatus.UP)),
            capacity=Sum("memory_mb", filter=Q(status=HostStatus.UP)),
        )
        .order_by()
    }
    vms = {
        row["cluster"]: row
        for row in VirtualMachine.objects.values("cluster")
        .annotate(
            given=Sum("memory_mb", filter=Q(host__isnull=False, status__in=HOLDING_STATUSES)),
            up=Count("pk", filter=Q(status=VmStatus.UP)),
            paused=Count("pk", filter=Q(status=VmStatus.PAUSED)),
            down=Count("pk", filter=Q(status=VmStatus.DOWN)),
            changing=Count("pk", filter=Q(status__in=_CHANGING)),
            unknown=Count("pk", filter=Q(status=VmStatus.UNKNOWN)),
            free=Count(
                "pk",
                filter=Q(pool__isnull=False, owner__isnull=True, status=VmStatus.UP),
            ),
            taken=Count("pk", filter=Q(pool__isnull=False, owner__isnull=False)),
        )
        .order_by()
    }
    minute = samples.minute_of(now)
    points = []
    for cluster in sorted(set(hosts) | set(vms)):
        load, held = hosts.get(cluster, {}), vms.get(cluster, {})
        points.append(
            ClusterSample(
                cluster_id=cluster,
                at=minute,
                cpu_percent=load.get("cpu"),
                memory_given_mb=held.get("given") or 0,
                memory_capacity_mb=load.get("capacity") or 0,
                vms_up=held.get("up", 0),
                vms_paused=held.get("paused", 0),
                vms_down=held.get("down", 0),
                vms_changing=held.get("changing", 0),
                vms_unknown=held.get("unknown", 0),
                pool_vms_free=held.get("free", 0),
                pool_vms_taken=held.get("taken", 0),
            )
        )
    ClusterSample.objects.bulk_create(
        points,
        update_conflicts=True,
        unique_fields=["cluster", "at"],
        update_fields=list(FIGURES),
        batch_size=1000,
    )
    return len(points)


def _summed(model, cluster_ids, start: datetime, now: datetime) -> list[Point]:
    rows = (
        model.objects.filter(cluster__in=cluster_ids, at__gt=start, at__lte=now)
        .values("at")
        .annotate(
            cpu=Avg("cpu_percent"),
            **{field: Sum(field) for field in FIGURES if field != "cpu_percent"},
        )
        .order_by("at")
        .values_list("at", "cpu", *FIGURES[1:])
    )
    return [Point._make(row) for row in rows]


def points_of(cluster_ids, span: Span, now: datetime | None = None) -> list[Point]:
    """The points of ``span`` before ``now`` of the clusters ``cluster_ids`` (a list or a
    queryset of ids), each minute's (or hour's) figures added up across them (the CPU
    averaged), oldest first: the minute points (one query), or for an ``hourly`` span one
    point an hour, the hourly points and the minutes averaged per hour (two queries)."""
    now = now or timezone.now()
    start = now - span.length
    minutes = _summed(ClusterSample, cluster_ids, start, now)
    if not span.hourly:
        return minutes
    hours = _summed(ClusterHourSample, cluster_ids, start, now)
    return samples.per_hour(samples.CLUSTERS_KEPT, hours, minutes)
