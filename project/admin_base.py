"""The base admin for Corral's models: lists restricted by role grants, each object checked.

Django's ModelAdmin asks ``has_perm`` without the object; this one passes it, so a
ClusterAdmin of one cluster sees and changes only what is in that cluster.
"""

from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from project.permissions import default_action, holds, restrict, scope_of_model

RECENT_WINDOWS = {
    "1h": ("Last hour", timedelta(hours=1)),
    "24h": ("Last 24 hours", timedelta(hours=24)),
    "7d": ("Last 7 days", timedelta(days=7)),
}


def recent_filter(field: str, title: str, parameter: str) -> type[admin.SimpleListFilter]:
    """A list filter keeping rows whose ``field`` lies in the last hour, day or week
    (``?<parameter>=1h``, ``24h``, ``7d``): links from the dashboard use it."""

    class RecentFilter(admin.SimpleListFilter):
        parameter_name = parameter

        def lookups(self, request, model_admin):
            return [(key, label) for key, (label, _) in RECENT_WINDOWS.items()]

        def queryset(self, request, queryset):
            window = RECENT_WINDOWS.get(self.value())
            if window is None:
                return queryset
            return queryset.filter(**{f"{field}__gte": timezone.now() - window[1]})

    RecentFilter.title = title
    RecentFilter.__name__ = f"Recent{parameter.title()}Filter"
    return RecentFilter


class ScopedAdmin(admin.ModelAdmin):
    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return restrict(queryset, request.user, default_action(self.model, "view"))

    def _allowed(self, request, verb: str, obj=None) -> bool:
        action = default_action(self.model, verb)
        if obj is not None:
            return holds(request.user, action, obj)
        # Every page asks each screen "anywhere?" several times (the menu, the buttons, the
        # actions): answer each action once per request.
        answers = request.__dict__.setdefault("_corral_held_anywhere", {})
        if action not in answers:
            answers[action] = holds(request.user, action)
        return answers[action]

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

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """A scope object's page links to the grant form, filled in for that object."""
        extra_context = dict(extra_context or {})
        scope = scope_of_model(self.model)
        obj = self.get_object(request, object_id) if scope else None
        if obj is not None and holds(request.user, "project.manage_grants", obj):
            query = urlencode({"object_type": scope, "object_id": obj.pk})
            extra_context["grant_url"] = f"{reverse('admin:project_usergrant_add')}?{query}"
        return super().change_view(request, object_id, form_url, extra_context)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = db_field.remote_field.model
        if hasattr(related, "grant_scopes"):
            kwargs["queryset"] = restrict(
                related._default_manager.all(), request.user, default_action(related, "view")
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
