"""The admin console's screens for OpenStack's objects: users' application credentials."""

from django.contrib import admin

from openstack.identity import services
from project.access.permissions import holds_at_system
from project.admin.base import recent_filter
from project.models import ApplicationCredential


@admin.register(ApplicationCredential)
class ApplicationCredentialAdmin(admin.ModelAdmin):
    """Users' application credentials, for whoever may see users (never a secret: only its
    hash is kept, and not shown); deleting one, for whoever may change users, ends its log-ins
    and tokens at once. They are made through Keystone's API, by their owner."""

    list_display = [
        "name",
        "owner",
        "id",
        "description",
        "expires_at",
        "unrestricted",
        "created_at",
    ]
    list_filter = ["unrestricted", recent_filter("created_at", "created", "created")]
    search_fields = ["name", "id", "owner__username", "description"]
    fields = ["id", "name", "owner", "description", "expires_at", "unrestricted", "created_at"]
    readonly_fields = fields
    list_select_related = ["owner"]

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_view_permission(self, request, obj=None):
        return holds_at_system(request.user, "auth.view_user") or self.has_delete_permission(
            request, obj
        )

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return holds_at_system(request.user, "auth.change_user")

    def delete_model(self, request, obj):
        services.delete_credential(obj)

    def delete_queryset(self, request, queryset):
        for credential in queryset:
            services.delete_credential(credential)
