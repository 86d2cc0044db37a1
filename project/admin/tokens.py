"""The admin console's API token screen: every user's tokens, for whoever may change users."""

from django.contrib import admin

from project.access.permissions import holds_at_system
from project.admin.base import recent_filter
from project.models import APIToken


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
