"""The admin console's roles screen: built-in roles shown locked, custom ones managed by whoever
holds project.manage_roles system-wide."""

from django.contrib import admin

from project.access.permissions import holds_at_system
from project.access.roles import delete_grant_permissions, ensure_grant_permissions
from project.models import Role


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    list_display = ["role", "builtin", "description", "action_count"]
    list_filter = ["builtin"]
    search_fields = ["name", "description"]
    filter_horizontal = ["actions"]
    readonly_fields = ["builtin"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("actions")

    @admin.display(ordering="name", description="role")
    def role(self, obj):
        return obj.human_name

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
