"""The inventory's Prometheus figures: jobs, hosts, VMs and placement decisions."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count, FloatField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from hosts.error_codes import JobErrorCode
from hosts.models import Host, HostStatus, Job, JobKind, JobState, VirtualMachine, VmStatus
from project.metrics import RECENT, gauge_by

# Placement outcomes, as operations record them on the job (result["placement"]["outcome"]).
DECISION_OUTCOMES = ("placed", "stayed", "no_host", "busy")


def collect(now: datetime) -> Iterator[Metric]:
    yield from _jobs(now)
    yield from _hosts(now)
    yield from _vms()
    yield from _decisions(now)


def _jobs(now) -> Iterator[Metric]:
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


def _hosts(now) -> Iterator[Metric]:
    hosts = list(
        Host.objects.order_by("cluster__name", "name").values_list(
            "name", "cluster__name", "status", "last_seen_at"
        )
    )
    yield gauge_by(
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


def _vms() -> Iterator[Metric]:
    rows = VirtualMachine.objects.order_by().values_list("status").annotate(n=Count("pk"))
    yield gauge_by("corral_vms", "VMs, by status.", "status", VmStatus.values, dict(rows))


def _decisions(now) -> Iterator[Metric]:
    placed = Job.objects.order_by().filter(result__has_key="placement")
    rows = placed.values_list(KT("result__placement__outcome"), "error_code").annotate(
        n=Count("pk")
    )
    counts: Counter = Counter()
    for outcome, error_code, n in rows:
        # Decisions recorded before outcomes were: a failed one is the job's no_host.
        counts[outcome or ("no_host" if error_code == JobErrorCode.NO_HOST else "placed")] += n
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
