"""Prometheus metrics at ``/metrics``, computed from the database at each scrape.

Every figure is read from the database when Prometheus asks, so every web process answers
the same and nothing is kept between scrapes (no multiprocess mode). A scrape costs a fixed
number of queries whatever the number of rows. Allowed with ``Authorization: Bearer
<CORRAL_METRICS_TOKEN>`` when that setting is set, or for a logged-in user who may view
hosts system-wide; anyone else gets a 404.
"""

from __future__ import annotations

import hmac
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F, FloatField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from hosts.models import Host, HostStatus, Job, JobKind, JobState, VirtualMachine, VmStatus
from leases.models import EventStatus, EventType, Lease, LeaseEvent, LeaseStatus
from pools.models import VmPool
from project.permissions import holds_at_system

RECENT = timedelta(hours=1)
# Placement outcomes, as operations record them on the job (result["placement"]["outcome"]).
DECISION_OUTCOMES = ("placed", "stayed", "no_host", "busy")


def _gauge_by(
    name: str, documentation: str, label: str, values: Iterable[str], counts: dict
) -> GaugeMetricFamily:
    """One sample per known value (zero when absent), plus any value only the rows know."""
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for value in dict.fromkeys([*values, *counts]):
        family.add_metric([str(value)], counts.get(value, 0))
    return family


class CorralCollector:
    """Reads the figures an operator alerts on: jobs, hosts, VMs, pools, scheduling, leases."""

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        yield from self._jobs(now)
        yield from self._hosts(now)
        yield from self._vms()
        yield from self._pools()
        yield from self._scheduler(now)
        yield from self._leases()

    def _jobs(self, now) -> Iterator[Metric]:
        rows = Job.objects.order_by().values_list("state", "kind").annotate(n=Count("pk"))
        counts = {(state, kind): n for state, kind, n in rows}
        family = GaugeMetricFamily(
            "corral_jobs", "Jobs stored, by state and kind.", labels=["state", "kind"]
        )
        known = [(state, kind) for state in JobState.values for kind in JobKind.values]
        for state, kind in dict.fromkeys([*known, *counts]):
            family.add_metric([state, kind], counts.get((state, kind), 0))
        yield family
        failed = Job.objects.filter(state=JobState.FAILED, finished_at__gte=now - RECENT).count()
        yield GaugeMetricFamily(
            "corral_jobs_failed_last_hour", "Jobs that failed in the last hour.", value=failed
        )

    def _hosts(self, now) -> Iterator[Metric]:
        hosts = list(
            Host.objects.order_by("cluster__name", "name").values_list(
                "name", "cluster__name", "status", "last_seen_at"
            )
        )
        yield _gauge_by(
            "corral_hosts",
            "Hosts, by status.",
            "status",
            HostStatus.values,
            Counter(status for _, _, status, _ in hosts),
        )
        lag = GaugeMetricFamily(
            "corral_host_sync_lag_seconds",
            "Seconds since the host last reported (NaN until its first report).",
            labels=["host", "cluster"],
        )
        state = GaugeMetricFamily(
            "corral_host_status",
            "1 for each host, labelled with its status.",
            labels=["host", "cluster", "status"],
        )
        for name, cluster, status, last_seen_at in hosts:
            seconds = (now - last_seen_at).total_seconds() if last_seen_at else math.nan
            lag.add_metric([name, cluster], seconds)
            state.add_metric([name, cluster, status], 1)
        yield lag
        yield state

    def _vms(self) -> Iterator[Metric]:
        rows = VirtualMachine.objects.order_by().values_list("status").annotate(n=Count("pk"))
        yield _gauge_by("corral_vms", "VMs, by status.", "status", VmStatus.values, dict(rows))

    def _pools(self) -> Iterator[Metric]:
        rows = (
            VmPool.objects.with_counts()
            .order_by("name")
            .values_list("name", "prestarted_vms", F("running_unassigned") + F("starting_vms"))
        )
        prestarted = GaugeMetricFamily(
            "corral_pool_prestarted",
            "The pool's unassigned VMs that are running or starting.",
            labels=["pool"],
        )
        target = GaugeMetricFamily(
            "corral_pool_prestarted_target",
            "How many VMs the pool keeps running and unassigned (prestarted_vms).",
            labels=["pool"],
        )
        below = 0
        for name, wanted, have in rows:
            prestarted.add_metric([name], have)
            target.add_metric([name], wanted)
            if have < wanted:
                below += 1
        yield prestarted
        yield target
        yield GaugeMetricFamily(
            "corral_pools_below_level",
            "Pools with fewer prestarted VMs than they should keep.",
            value=below,
        )

    def _scheduler(self, now) -> Iterator[Metric]:
        placed = Job.objects.order_by().filter(result__has_key="placement")
        rows = placed.values_list(KT("result__placement__outcome"), "error_code").annotate(
            n=Count("pk")
        )
        counts: Counter = Counter()
        for outcome, error_code, n in rows:
            # Decisions recorded before outcomes were: a failed one is the job's no_host.
            counts[outcome or ("no_host" if error_code == "no_host" else "placed")] += n
        decisions = CounterMetricFamily(
            "corral_scheduler_decisions",
            "Placement decisions recorded on the jobs stored, by outcome.",
            labels=["outcome"],
        )
        for outcome in dict.fromkeys([*DECISION_OUTCOMES, *counts]):
            decisions.add_metric([outcome], counts.get(outcome, 0))
        yield decisions
        recent = placed.filter(
            started_at__gte=now - RECENT, result__placement__has_key="seconds"
        ).aggregate(
            count=Count("pk"),
            total=Sum(Cast(KT("result__placement__seconds"), FloatField())),
        )
        yield SummaryMetricFamily(
            "corral_scheduler_decision_seconds_last_hour",
            "Time placement decisions took (waiting for the cluster's scheduling lock "
            "included), over the jobs started in the last hour.",
            count_value=recent["count"],
            sum_value=recent["total"] or 0.0,
        )

    def _leases(self) -> Iterator[Metric]:
        rows = (
            LeaseEvent.objects.order_by()
            .values_list("event_type", "status")
            .annotate(n=Count("pk"))
        )
        counts = {(kind, status): n for kind, status, n in rows}
        family = GaugeMetricFamily(
            "corral_lease_events", "Lease events, by kind and status.", labels=["kind", "status"]
        )
        known = [(kind, status) for kind in EventType.values for status in EventStatus.values]
        for kind, status in dict.fromkeys([*known, *counts]):
            family.add_metric([kind, status], counts.get((kind, status), 0))
        yield family
        rows = Lease.objects.order_by().values_list("status").annotate(n=Count("pk"))
        yield _gauge_by(
            "corral_leases", "Leases, by status.", "status", LeaseStatus.values, dict(rows)
        )


registry = CollectorRegistry(auto_describe=False)
registry.register(CorralCollector())


def _may_scrape(request) -> bool:
    token = settings.CORRAL_METRICS_TOKEN
    offered = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(offered.encode(), f"Bearer {token}".encode()):
        return True
    user = request.user
    return user.is_authenticated and holds_at_system(user, "hosts.view_host")


@require_GET
def metrics_view(request):
    """The metrics in Prometheus' text format, for a scraper with the token or an admin."""
    if not _may_scrape(request):
        raise Http404
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
