"""A cluster's last day, week or month (``hosts.spans``) drawn on the server (its admin page),
and every cluster's an admin may see added up (the dashboard): the load of its hosts, its VMs
by state and its pools' VMs free and taken, each an SVG line chart (``hosts.charts``) with a
summary, and a table as their text alternative."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.utils import timezone

from hosts import cluster_samples
from hosts.charts import Chart, Column, Series, draw
from hosts.models import Cluster
from hosts.spans import DAY, Span
from project.access.permissions import restrict

VM_STATES = (
    Series("Up", "vms_up", "a"),
    Series("Paused", "vms_paused", "b"),
    Series("Down", "vms_down", "c"),
    Series("Changing state", "vms_changing", "d"),
    Series("Unknown", "vms_unknown", "e"),
)


class Point(NamedTuple):
    """A minute of the charts: memory given as a share of the usable hosts' memory."""

    at: datetime
    cpu_percent: float | None
    memory_percent: float | None
    vms_up: int
    vms_paused: int
    vms_down: int
    vms_changing: int
    vms_unknown: int
    pool_vms_free: int
    pool_vms_taken: int


def _drawn(point: cluster_samples.Point) -> Point:
    capacity = point.memory_capacity_mb
    return Point(
        point.at,
        point.cpu_percent,
        100 * point.memory_given_mb / capacity if capacity else None,
        *point[4:],
    )


def _charts(points: list[Point], span: Span) -> list[Chart]:
    vms_top = max([*(sum(p[3:8]) for p in points), 1])
    pools_top = max([*(p.pool_vms_free + p.pool_vms_taken for p in points), 1])
    return [
        Chart(
            "utilisation",
            f"Hosts' CPU in use and memory given to VMs, {span.words}",
            "%",
            [
                Series("CPU in use", "cpu_percent", "a"),
                Series("Memory given to VMs", "memory_percent", "b"),
            ],
            100,
        ),
        Chart("vms-by-state", f"VMs by state, {span.words}", "", list(VM_STATES), vms_top),
        Chart(
            "pool-vms",
            f"Pool VMs free and taken, {span.words}",
            "",
            [
                Series("Free (running, nobody holds it)", "pool_vms_free", "a"),
                Series("Taken", "pool_vms_taken", "b"),
            ],
            pools_top,
        ),
    ]


COLUMNS = [
    Column("CPU in use", "cpu_percent", unit="%"),
    Column("memory given", "memory_percent", unit="%"),
    *(Column(f"most VMs {s.name.lower()}", s.field, most=True) for s in VM_STATES),
    Column("most pool VMs free", "pool_vms_free", most=True),
    Column("most pool VMs taken", "pool_vms_taken", most=True),
]


def clusters_span(cluster_ids, whose: str, span: Span = DAY, now: datetime | None = None) -> str:
    """The charts of ``span`` of the clusters ``cluster_ids`` added up, as HTML (one query for
    the day, two for longer spans); ``whose`` names them in the table's caption ("This
    cluster", "Your clusters")."""
    now = now or timezone.now()
    points = [_drawn(p) for p in cluster_samples.points_of(cluster_ids, span, now)]
    return draw(points, _charts(points, span), COLUMNS, f"{whose}:", span, now)


def visible_span(user, span: Span = DAY, now: datetime | None = None) -> str:
    """The charts of ``span`` of every cluster ``user`` may see, added up (the dashboard's)."""
    clusters = restrict(Cluster.objects.all(), user, "hosts.view_cluster").values("pk")
    return clusters_span(clusters, "Your clusters", span, now)
