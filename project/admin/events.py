"""The admin console's event screen: the feed and its alerts, as each admin's grants show them."""

from django.contrib import admin

from project import events
from project.admin.base import recent_filter
from project.models import Event


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    """The event feed and its alerts, newest first; each admin sees what their grants cover."""

    list_display = ["id", "created_at", "kind", "object_type", "object_id", "message"]
    list_filter = ["kind", "object_type", recent_filter("created_at", "when", "age")]
    search_fields = ["message"]
    ordering = ["-id"]

    def get_queryset(self, request):
        return events.visible_events(request.user)

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
