"""Admin console screens for leases and their reservations, and each cluster's capacity
timeline."""

from datetime import datetime, time, timedelta

from django import forms
from django.contrib import admin
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from hosts.models import Cluster
from leases.capacity_timeline import chart, cluster_timeline
from leases.models import Allocation, Lease, LeaseEvent, Reservation
from leases.services import delete_lease
from project.access.permissions import restrict
from project.admin.base import LabelledTabularInline, ScopedAdmin, extend_admin

MAX_TIMELINE_DAYS = 90


class TimelineForm(forms.Form):
    start = forms.DateField(
        required=False,
        help_text="First day shown (default: today).",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    days = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_TIMELINE_DAYS, help_text="How many days."
    )


def timeline_window(data: dict) -> tuple[datetime, datetime]:
    """The window a (cleaned) timeline form asks for: from midnight of its first day."""
    day = data.get("start") or timezone.localdate()
    start = timezone.make_aware(datetime.combine(day, time.min))
    return start, start + timedelta(days=data.get("days") or 14)


def capacity_timeline_view(model_admin, request, cluster_id: int):
    """Reserved against free reservable capacity of one cluster, day by day (404 for a
    cluster the user may not see)."""
    cluster = (
        restrict(Cluster.objects.all(), request.user, "hosts.view_cluster")
        .filter(pk=cluster_id)
        .first()
    )
    if cluster is None:
        raise Http404("No such cluster.")
    form = TimelineForm(request.GET or None)
    timeline = charts = None
    if not form.is_bound or form.is_valid():
        start, end = timeline_window(form.cleaned_data if form.is_bound else {})
        timeline = cluster_timeline(cluster.pk, start, end)
        charts = [chart(timeline, "vcpus"), chart(timeline, "memory")]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Capacity timeline of {cluster.name}",
        "cluster": cluster,
        "cluster_opts": Cluster._meta,
        "form": form,
        "timeline": timeline,
        "charts": charts,
    }
    return TemplateResponse(request, "admin/leases/capacity_timeline.html", context)


class ReservationInline(LabelledTabularInline):
    model = Reservation
    fields = [
        "resource_type",
        "status",
        "vcpus",
        "memory_mb",
        "amount",
        "affinity",
        "min",
        "max",
        "missing",
        "missing_since",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class LeaseEventInline(LabelledTabularInline):
    model = LeaseEvent
    fields = ["event_type", "time", "status", "done_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Lease)
class LeaseAdmin(ScopedAdmin):
    """Leases are made through the API and the portal, which check capacity; here they are
    followed (and deleted)."""

    list_display = ["name", "owner", "status", "degraded", "start_date", "end_date"]
    list_filter = ["status", "degraded"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner"]
    date_hierarchy = "start_date"
    inlines = [ReservationInline, LeaseEventInline]
    readonly_fields = [
        "name",
        "owner",
        "group",
        "start_date",
        "end_date",
        "before_end_date",
        "status",
        "degraded",
        "end_action",
    ]

    def changelist_view(self, request, extra_context=None):
        clusters = restrict(
            Cluster.objects.filter(hosts__reservable=True).distinct(),
            request.user,
            "hosts.view_cluster",
        )
        extra_context = {**(extra_context or {}), "capacity_clusters": clusters[:20]}
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        timeline = self.admin_site.admin_view(
            lambda request, cluster_id: capacity_timeline_view(self, request, cluster_id)
        )
        return [
            path("capacity/<int:cluster_id>/", timeline, name="leases_capacity_timeline"),
            *super().get_urls(),
        ]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        delete_lease(obj)


class AllocationInline(LabelledTabularInline):
    model = Allocation
    fields = ["host", "slots", "whole_host"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Reservation)
class ReservationAdmin(ScopedAdmin):
    list_display = ["id", "lease", "resource_type", "status", "vcpus", "memory_mb", "amount"]
    list_filter = ["resource_type", "status"]
    list_select_related = ["lease"]
    inlines = [AllocationInline]
    readonly_fields = [
        "lease",
        "resource_type",
        "status",
        "vcpus",
        "memory_mb",
        "disk_gb",
        "amount",
        "affinity",
        "min",
        "max",
        "host_properties",
        "missing",
        "missing_since",
    ]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class CapacityLink:
    """The clusters' admin screen links each cluster to its capacity timeline."""

    @admin.display(description="leases")
    def capacity_link(self, obj):
        url = reverse("admin:leases_capacity_timeline", args=[obj.pk])
        return format_html('<a href="{}">capacity timeline</a>', url)


extend_admin(Cluster, CapacityLink, list_display=["capacity_link"])
