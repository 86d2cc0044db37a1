"""Admin console screens for roles, events and tokens (users: project/admin_users.py; grants:
project/admin_grants.py)."""

from django.contrib import admin

from project import (
    admin_grants,  # noqa: F401  (registers the grant screens)
    admin_users,  # noqa: F401  (registers the users screen)
    events,
)
from project.admin_base import recent_filter
from project.models import APIToken, Event, Role
from project.permissions import holds_at_system
from project.roles import delete_grant_permissions, ensure_grant_permissions


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    list_display = ["name", "builtin", "description", "action_count"]
    list_filter = ["builtin"]
    search_fields = ["name", "description"]
    filter_horizontal = ["actions"]
    readonly_fields = ["builtin"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("actions")

    @admin.display(description="actions")
    def action_count(self, obj):
        return len(obj.actions.all())

    def get_readonly_fields(self, request, obj=None):
        return ["name", "builtin"] if obj is not None else ["builtin"]

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_add_permission(self, request):
        return holds_at_system(request.user, "project.manage_roles")

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.builtin:
            return False
        return holds_at_system(request.user, "project.manage_roles")

    def has_delete_permission(self, request, obj=None):
        return self.has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        ensure_grant_permissions(obj)

    def delete_model(self, request, obj):
        delete_grant_permissions(obj)
        obj.delete()

    def delete_queryset(self, request, queryset):
        for role in queryset.filter(builtin=False):
            self.delete_model(request, role)


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


@admin.register(APIToken)
class APITokenAdmin(admin.ModelAdmin):
    """Every user's tokens, for whoever may change users: what each is, whose, until when, and
    deleting one revokes it. The tokens themselves are not kept (only a hash), so never shown."""

    list_display = ["id", "user", "kind", "name", "created", "expiry", "credential"]
    list_filter = ["kind", recent_filter("created", "made", "made")]
    search_fields = ["user__username", "name"]
    list_select_related = ["user", "credential"]
    fields = ["user", "kind", "name", "created", "expiry", "credential"]
    readonly_fields = fields
    ordering = ["-created", "-id"]

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_view_permission(self, request, obj=None):
        return holds_at_system(request.user, "auth.change_user")

    def has_add_permission(self, request):
        return False  # a token is made by its user, and shown to them alone

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return self.has_view_permission(request, obj)
