"""Admin console screens for roles, grants, events and application credentials (users:
project/admin_users.py)."""

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError

from project import (
    admin_users,  # noqa: F401  (registers the users screen)
    events,
    scopes,
)
from project import grants as grant_service
from project.admin_base import recent_filter
from project.models import Event, GroupGrant, Role, UserGrant
from project.permissions import holds, holds_at_system, scope_of_model
from project.roles import delete_grant_permissions, ensure_grant_permissions

MANAGE_GRANTS = "project.manage_grants"


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


class GrantForm(forms.ModelForm):
    role = forms.ModelChoiceField(Role.objects.all())
    object_type = forms.ChoiceField(choices=scopes.choices)
    object_id = forms.IntegerField(
        required=False, min_value=1, help_text="Leave empty for a system-wide grant."
    )

    def clean(self):
        data = super().clean()
        if "object_type" in data:
            try:
                data["object"] = grant_service.scope_object(
                    data["object_type"], data.get("object_id")
                )
            except ValidationError as exc:
                raise ValidationError(exc.message_dict) from exc
        return data


class GrantAdmin(admin.ModelAdmin):
    """Grants are added and revoked, never edited: revoke and grant again instead."""

    principal = "user"
    list_display = ["role_name", "principal_name", "object_type", "object_pk", "scope_name"]
    list_select_related = ["permission", "content_type"]

    def get_form(self, request, obj=None, **kwargs):
        kwargs["form"] = type(
            "Form",
            (GrantForm,),
            {"Meta": type("Meta", (), {"model": self.model, "fields": [self.principal]})},
        )
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return [self.principal, "role", "object_type", "object_id"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .filter(permission__codename__startswith="role_")
            .filter(grant_service.visible_grants_filter(request.user, self.model.__mro__[1]))
        )

    @admin.display(description="role")
    def role_name(self, obj):
        return obj.permission.name.removeprefix("Holds role ")

    @admin.display(description="to")
    def principal_name(self, obj):
        return str(getattr(obj, self.principal))

    @admin.display(description="object type")
    def object_type(self, obj):
        return scope_of_model(obj.content_type.model_class())

    @admin.display(description="object")
    def scope_name(self, obj):
        return str(obj.content_object)

    def has_module_permission(self, request):
        return holds(request.user, MANAGE_GRANTS)

    def has_view_permission(self, request, obj=None):
        return holds(request.user, MANAGE_GRANTS)

    def has_add_permission(self, request):
        return holds(request.user, MANAGE_GRANTS)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        if obj is None:
            return holds(request.user, MANAGE_GRANTS)
        return holds(request.user, MANAGE_GRANTS, obj.content_object)

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        try:
            grant, _ = grant_service.grant_role(
                data["role"],
                data["object"],
                granted_by=request.user,
                **{self.principal: data[self.principal]},
            )
        except PermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        saved = self.model.objects.get(pk=int(grant.id[1:]))
        obj.__dict__.update({k: v for k, v in saved.__dict__.items() if not k.startswith("_")})


@admin.register(UserGrant)
class UserGrantAdmin(GrantAdmin):
    principal = "user"
    list_filter = ["content_type"]
    search_fields = ["user__username", "permission__name"]


@admin.register(GroupGrant)
class GroupGrantAdmin(GrantAdmin):
    principal = "group"
    list_filter = ["content_type"]
    search_fields = ["group__name", "permission__name"]


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
