"""Admin console screens for leases and their reservations."""

from django.contrib import admin

from leases.models import Allocation, Lease, LeaseEvent, Reservation
from project.admin_base import ScopedAdmin


class ReservationInline(admin.TabularInline):
    model = Reservation
    fields = ["resource_type", "status", "vcpus", "memory_mb", "amount", "affinity", "min", "max"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class LeaseEventInline(admin.TabularInline):
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

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        from leases.services import delete_lease

        delete_lease(obj)


class AllocationInline(admin.TabularInline):
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
    ]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
