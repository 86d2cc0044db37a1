"""The base admin for Corral's models: lists restricted by role grants, each object checked.

Django's ModelAdmin asks ``has_perm`` without the object; this one passes it, so a
ClusterAdmin of one cluster sees and changes only what is in that cluster.
"""

from datetime import timedelta
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import models
from django.urls import reverse
from django.utils import timezone

from project.access import scopes
from project.access.permissions import (
    default_action,
    holds,
    placement_refusal,
    scope_keys,
    scope_paths,
    viewable,
)
from project.json_input import JSONFormField

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


def _scope_fields(model) -> list[str]:
    """The model's own fields that hold a containing scope's key (``cluster`` for a host)."""
    attnames = {path for paths in scope_paths(model).values() for path in paths}
    return [
        field.name
        for field in model._meta.concrete_fields
        if field.attname in attnames and not field.primary_key
    ]


def placement_checked(form_class: type[forms.ModelForm], user, stored_keys) -> type:
    """``form_class`` with one more check after the model's own validation: the user may put
    the object, as it will be saved, where it would be (``placement_refusal()``). The refusal
    is shown on the scope field that was changed (``cluster``), or above the form."""

    class PlacementCheckedForm(form_class):
        def _post_clean(self):
            super()._post_clean()
            if self._errors:
                return  # correct those first; the object is not complete yet
            refusal = placement_refusal(user, self.instance, stored_keys)
            if refusal is None:
                return
            shown = [name for name in _scope_fields(self._meta.model) if name in self.fields]
            changed = [name for name in shown if name in self.changed_data]
            self.add_error((changed or shown or [None])[0], refusal)

    PlacementCheckedForm.__name__ = form_class.__name__
    return PlacementCheckedForm


def _inline_refusal(user, formset, row) -> str | None:
    """Why ``user`` may not save this inline row as submitted; None if they may."""
    model = formset.model
    stored = None if row.instance._state.adding else model._default_manager.get(pk=row.instance.pk)
    if stored is not None and formset.can_delete and row.cleaned_data.get("DELETE"):
        if holds(user, default_action(model, "delete"), stored):
            return None
        return f"You may not delete {model._meta.verbose_name} {stored}."
    if not row.has_changed():
        return None
    if stored is None:
        # The row joins the page's object (saved by now) when it is saved: check it there.
        setattr(row.instance, formset.fk.name, formset.instance)
        return placement_refusal(user, row.instance)
    if not holds(user, default_action(model, "change"), stored):
        return f"You may not change {model._meta.verbose_name} {stored}."
    return placement_refusal(user, row.instance, scope_keys(stored))


# JSON typed into a form is held to the API's limits (depth, lone surrogates).
JSON_FORM_FIELDS = {models.JSONField: {"form_class": JSONFormField}}


class ScopedAdmin(admin.ModelAdmin):
    formfield_overrides = JSON_FORM_FIELDS

    def get_queryset(self, request):
        return viewable(super().get_queryset(request), request.user)

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
        scope = scopes.of_model(self.model)
        obj = self.get_object(request, object_id) if scope else None
        if obj is not None and holds(request.user, "project.manage_grants", obj):
            query = urlencode({"object": f"{scope}:{obj.pk}"})
            extra_context["grant_url"] = f"{reverse('admin:project_usergrant_add')}?{query}"
        return super().change_view(request, object_id, form_url, extra_context)

    def get_form(self, request, obj=None, change=False, **kwargs):
        """The model's form, refusing to save the object where the user may not put it."""
        form = super().get_form(request, obj, change, **kwargs)
        stored_keys = scope_keys(obj) if obj is not None and obj.pk is not None else None
        return placement_checked(form, request.user, stored_keys)

    def save_formset(self, request, form, formset, change):
        """Inline rows are checked like the page's own object: each new row needs the add
        action where it lands, each changed row the change action (and, if it moves, the add
        action where it goes), each deleted row the delete action. The page's transaction
        rolls back on a refusal."""
        if scope_paths(formset.model):
            for row in formset.forms:
                refusal = _inline_refusal(request.user, formset, row)
                if refusal is not None:
                    raise PermissionDenied(refusal)
        super().save_formset(request, form, formset, change)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = db_field.remote_field.model
        if hasattr(related, "grant_scopes"):
            kwargs["queryset"] = viewable(related._default_manager.all(), request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


def extend_admin(model, extension: type, **lists: list) -> None:
    """Plug an upper app into a lower app's admin screen for ``model``: the screen becomes a
    subclass of what is registered now with ``extension``'s methods (actions, columns,
    permission checks), and each list attribute named in ``lists`` (``actions``,
    ``list_display``…) gets those entries appended (before ``"delete_selected"`` for actions,
    which stays last)."""
    current = type(admin.site.get_model_admin(model))
    attributes = {}
    for name, added in lists.items():
        values = [value for value in getattr(current, name) or [] if value not in added]
        if name == "actions" and "delete_selected" in values:
            at = values.index("delete_selected")
            values[at:at] = added
        else:
            values += added
        attributes[name] = values
    extended = type(current.__name__, (extension, current), attributes)
    extended.__module__ = current.__module__
    admin.site.unregister(model)
    admin.site.register(model, extended)


class LabelledTabularInline(admin.TabularInline):
    """A tabular inline whose inputs are named for screen readers: Django shows each field's
    label only as its column's heading, which nothing ties to the inputs below it."""

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)

        class Labelled(formset):
            def add_fields(self, form, index):
                super().add_fields(form, index)
                for name, field in form.fields.items():
                    label = field.label or name.replace("_", " ")
                    field.widget.attrs.setdefault("aria-label", str(label).capitalize())

        Labelled.__name__ = formset.__name__
        return Labelled
