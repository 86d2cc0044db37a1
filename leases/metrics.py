"""The leases' Prometheus figures: leases by status and lease events by kind and status."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric

from leases.models import EventStatus, EventType, Lease, LeaseEvent, LeaseStatus
from project.metrics import gauge_by


def collect(now: datetime) -> Iterator[Metric]:
    rows = LeaseEvent.objects.order_by().values_list("event_type", "status").annotate(n=Count("pk"))
    counts = {(kind, status): n for kind, status, n in rows}
    family = GaugeMetricFamily(
        "corral_lease_events", "Lease events, by kind and status.", labels=["kind", "status"]
    )
    known = [(kind, status) for kind in EventType.values for status in EventStatus.values]
    for kind, status in dict.fromkeys([*known, *counts]):
        family.add_metric([kind, status], counts.get((kind, status), 0))
    yield family
    rows = Lease.objects.order_by().values_list("status").annotate(n=Count("pk"))
    yield gauge_by("corral_leases", "Leases, by status.", "status", LeaseStatus.values, dict(rows))
