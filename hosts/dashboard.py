"""The inventory's sections of the admin dashboard: hosts and VMs by status, and jobs."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q
from django.urls import reverse

from hosts import cluster_charts, spans
from hosts.models import Host, HostStatus, Job, JobState, VirtualMachine, VmStatus
from project import dashboard
from project.access.permissions import restrict

FAILED_JOB_WINDOW = timedelta(hours=1)


def hosts(request, now):
    visible = restrict(Host.objects.all(), request.user, "hosts.view_host")
    return dashboard.by_status(visible, HostStatus.choices, dashboard.changelist(Host))


def vms(request, now):
    visible = restrict(VirtualMachine.objects.all(), request.user, "hosts.view_virtualmachine")
    return dashboard.by_status(visible, VmStatus.choices, dashboard.changelist(VirtualMachine))


def jobs(request, now) -> list[dashboard.Figure]:
    counts = restrict(Job.objects.all(), request.user, "hosts.view_job").aggregate(
        running=Count("pk", filter=Q(state=JobState.RUNNING)),
        failed=Count(
            "pk", filter=Q(state=JobState.FAILED, finished_at__gte=now - FAILED_JOB_WINDOW)
        ),
    )
    url = dashboard.changelist(Job)
    return [
        dashboard.Figure("running", "Running", counts["running"], f"{url}?state__exact=running"),
        dashboard.Figure(
            "failed-last-hour",
            "Failed in the last hour",
            counts["failed"],
            f"{url}?state__exact=failed&finished=1h",
        ),
    ]


def day(request, now) -> dict:
    """Every cluster the admin may see, added up, in charts over the span the page asks for
    (``?span=week``): what ``hosts/_span_charts.html`` reads."""
    span = spans.on_page(request)
    charts = cluster_charts.visible_span(request.user, span, now)
    return spans.box("dashboard", reverse("admin:hosts_cluster_all_day_charts"), span, charts)


def register() -> None:
    dashboard.register(
        "day",
        model_label="hosts.Cluster",
        template="admin/corral/dashboard/day.html",
        compute=day,
        rank=60,
        live=False,
    )
    dashboard.register(
        "hosts",
        model_label="hosts.Host",
        template="admin/corral/dashboard/hosts.html",
        compute=hosts,
        rank=10,
    )
    dashboard.register(
        "vms",
        model_label="hosts.VirtualMachine",
        template="admin/corral/dashboard/vms.html",
        compute=vms,
        rank=20,
    )
    dashboard.register(
        "jobs",
        model_label="hosts.Job",
        template="admin/corral/dashboard/jobs.html",
        compute=jobs,
        rank=50,
    )
