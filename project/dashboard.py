"""The admin console's dashboard: the figures an operator watches, each counted over what the
admin may see and linking to the filtered list it counts.

A fixed number of queries whatever the number of rows: one per figure group, plus the
permission checks that decide which groups to show.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from hosts.models import Host, HostStatus, Job, JobState, VirtualMachine, VmStatus
from pools.admin import below_prestarted
from pools.models import VmPool
from project.events import visible_events
from project.models import Event, EventKind
from project.permissions import restrict

ALERT_WINDOW = timedelta(hours=24)
FAILED_JOB_WINDOW = timedelta(hours=1)
SHOWN_POOLS = 10
SHOWN_ALERTS = 5


@dataclass
class Figure:
    key: str
    label: str
    count: int
    url: str


@dataclass
class ShortPool:
    name: str
    prestarted: int
    wanted: int
    url: str


def _changelist(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def _by_status(queryset, choices, url: str) -> list[Figure]:
    counts = dict(queryset.order_by().values_list("status").annotate(n=Count("pk")))
    return [
        Figure(value, label, counts.get(value, 0), f"{url}?status__exact={value}")
        for value, label in choices
    ]


def _may_view(request, site, model) -> bool:
    return site.is_registered(model) and site.get_model_admin(model).has_view_permission(request)


def dashboard(request, site) -> dict:
    """Every figure group the admin may see: hosts and VMs by status, pools below their
    prestarted level, alerts of the last day, running jobs and jobs failed in the last hour."""
    user, now = request.user, timezone.now()
    figures: dict = {}
    if _may_view(request, site, Host):
        hosts = restrict(Host.objects.all(), user, "hosts.view_host")
        figures["hosts"] = _by_status(hosts, HostStatus.choices, _changelist(Host))
    if _may_view(request, site, VirtualMachine):
        vms = restrict(VirtualMachine.objects.all(), user, "hosts.view_virtualmachine")
        figures["vms"] = _by_status(vms, VmStatus.choices, _changelist(VirtualMachine))
    if _may_view(request, site, VmPool):
        figures["pools"] = _short_pools(user)
    if _may_view(request, site, Event):
        figures["alerts"] = _alerts(user, now)
    if _may_view(request, site, Job):
        figures["jobs"] = _jobs(user, now)
    return figures


def _short_pools(user) -> dict:
    pools = below_prestarted(
        restrict(VmPool.objects.all(), user, "pools.view_vmpool").with_counts()
    ).order_by("name")
    rows = list(
        pools.values("pk", "name", "prestarted_vms", "running_unassigned", "starting_vms")[
            : SHOWN_POOLS + 1
        ]
    )
    count = len(rows) if len(rows) <= SHOWN_POOLS else pools.count()
    return {
        "count": count,
        "url": f"{_changelist(VmPool)}?prestarted=short",
        "shown": [
            ShortPool(
                name=row["name"],
                prestarted=row["running_unassigned"] + row["starting_vms"],
                wanted=row["prestarted_vms"],
                url=reverse("admin:pools_vmpool_change", args=[row["pk"]]),
            )
            for row in rows[:SHOWN_POOLS]
        ],
    }


def _alerts(user, now) -> dict:
    alerts = visible_events(user).filter(kind=EventKind.ALERT, created_at__gte=now - ALERT_WINDOW)
    latest = list(alerts.order_by("-id")[:SHOWN_ALERTS])
    count = len(latest) if len(latest) < SHOWN_ALERTS else alerts.count()
    return {
        "count": count,
        "url": f"{_changelist(Event)}?kind__exact={EventKind.ALERT}&age=24h",
        "latest": latest,
    }


def _jobs(user, now) -> list[Figure]:
    counts = restrict(Job.objects.all(), user, "hosts.view_job").aggregate(
        running=Count("pk", filter=Q(state=JobState.RUNNING)),
        failed=Count(
            "pk", filter=Q(state=JobState.FAILED, finished_at__gte=now - FAILED_JOB_WINDOW)
        ),
    )
    url = _changelist(Job)
    return [
        Figure("running", "Running", counts["running"], f"{url}?state__exact=running"),
        Figure(
            "failed-last-hour",
            "Failed in the last hour",
            counts["failed"],
            f"{url}?state__exact=failed&finished=1h",
        ),
    ]
