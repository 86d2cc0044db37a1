"""The base admin for Corral's models: lists restricted by role grants, each object checked.

Django's ModelAdmin asks ``has_perm`` without the object; this one passes it, so a
ClusterAdmin of one cluster sees and changes only what is in that cluster.
"""

from django.contrib import admin

from project.permissions import default_action, holds, restrict


class ScopedAdmin(admin.ModelAdmin):
    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return restrict(queryset, request.user, default_action(self.model, "view"))

    def _allowed(self, request, verb: str, obj=None) -> bool:
        return holds(request.user, default_action(self.model, verb), obj)

    def has_view_permission(self, request, obj=None):
        return self._allowed(request, "view", obj) or self._allowed(request, "change", obj)

    def has_change_permission(self, request, obj=None):
        return self._allowed(request, "change", obj)

    def has_delete_permission(self, request, obj=None):
        return self._allowed(request, "delete", obj)

    def has_add_permission(self, request):
        return self._allowed(request, "add")

    def has_module_permission(self, request):
        return self._allowed(request, "view")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = db_field.remote_field.model
        if hasattr(related, "grant_scopes"):
            kwargs["queryset"] = restrict(
                related._default_manager.all(), request.user, default_action(related, "view")
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
