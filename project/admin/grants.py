"""The admin console's grant screens: grants to users and to groups, added with a searchable
picker of the objects the admin may grant on, listed by the kinds of object one grants on."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model
from django.http import JsonResponse
from django.urls import path, reverse

from project.access import grants as grant_service
from project.access import scopes
from project.access.permissions import holds, restrict
from project.models import GroupGrant, Role, System, UserGrant, human_role_name

MANAGE_GRANTS = "project.manage_grants"
PICKER_PAGE_SIZE = 20  # objects of each kind per page of the picker's answers
SYSTEM_LABEL = "The whole system"


def kind_name(scope: str, *, plural: bool = False, capital: bool = True) -> str:
    """What the screens call a kind of object: "VM pool", "Virtual machines"."""
    opts = scopes.model(scope)._meta
    name = str(opts.verbose_name_plural if plural else opts.verbose_name)
    return name[:1].upper() + name[1:] if capital else name


def object_value(scope: str, obj: Model) -> str:
    """The picker's value for an object: "system", or the kind and the id ("pool:12")."""
    return "system" if scope == "system" else f"{scope}:{obj.pk}"


def object_label(scope: str, obj: Model) -> str:
    if scope == "system":
        return SYSTEM_LABEL
    return f"{kind_name(scope)}: {obj.name}"


def grantable(scope: str, user):
    """The objects of one kind on which ``user`` may grant roles."""
    return restrict(scopes.model(scope).objects.all(), user, MANAGE_GRANTS)


def find_object(value: str, user) -> tuple[str, Model]:
    """The scope and object a picker value names, among those ``user`` may grant on;
    ValidationError otherwise (an object the user may not grant on is reported missing, so
    that the form does not tell whether it exists)."""
    scope, _, key = value.partition(":")
    if scope not in scopes.names():
        kinds = ", ".join(kind_name(name, capital=False) for name in scopes.names())
        raise ValidationError(f"Choose an object to grant on: {kinds}.")
    if scope == "system":
        found = grantable("system", user).filter(pk=System.get().pk) if not key else None
    else:
        found = grantable(scope, user).filter(pk=int(key)) if key.isdigit() else None
    obj = found.first() if found is not None else None
    if obj is None:
        raise ValidationError(
            f"There is no such {kind_name(scope, capital=False)} you may grant on."
        )
    return scope, obj


class GrantObjectPicker(forms.Select):
    """A select2 box, as Django's autocomplete fields have, that asks the grant screen's picker
    endpoint for the objects matching what the admin types; it holds only the chosen one."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = None
        self.url = ""

    def build_attrs(self, base_attrs, extra_attrs=None):
        attrs = super().build_attrs(base_attrs, extra_attrs)
        attrs.update(
            {
                "class": "admin-autocomplete corral-grant-object",
                "data-ajax--cache": "true",
                "data-ajax--delay": 250,
                "data-ajax--type": "GET",
                "data-ajax--url": self.url,
                "data-theme": "admin-autocomplete",
                "data-allow-clear": "false",
                "data-placeholder": "Type a name to search",
            }
        )
        return attrs

    def optgroups(self, name, value, attrs=None):
        options = [self.create_option(name, "", "", False, 0)]
        chosen = next((v for v in value if v), None)
        if chosen and self.user is not None:
            try:
                scope, obj = find_object(chosen, self.user)
            except ValidationError:
                pass
            else:
                label = object_label(scope, obj)
                options.append(self.create_option(name, chosen, label, True, 1))
        return [(None, options, 0)]

    @property
    def media(self):
        extra = "" if settings.DEBUG else ".min"
        return forms.Media(
            js=(
                f"admin/js/vendor/jquery/jquery{extra}.js",
                f"admin/js/vendor/select2/select2.full{extra}.js",
                "admin/js/jquery.init.js",
                "admin/js/autocomplete.js",
                "corral/admin-picker.js",
            ),
            css={
                "screen": (
                    f"admin/css/vendor/select2/select2{extra}.css",
                    "admin/css/autocomplete.css",
                )
            },
        )


class GrantForm(forms.ModelForm):
    """A grant to add: who, which role, on what. ``granted_by`` is set by the screen."""

    granted_by = None
    picker_url = ""

    role = forms.ModelChoiceField(Role.objects.all())
    object = forms.CharField(
        label="On",
        widget=GrantObjectPicker,
        help_text="The system, or a cluster, pool, lease or VM you may grant on.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        picker = self.fields["object"].widget
        picker.user, picker.url = self.granted_by, self.picker_url

    def clean_object(self):
        return find_object(self.cleaned_data["object"], self.granted_by)[1]

    def clean(self):
        data = super().clean()
        if "object" in data and "role" in data:
            try:
                grant_service.check_may_grant(self.granted_by, data["role"], data["object"])
            except PermissionDenied as exc:
                self.add_error("role", str(exc))
        return data


class GrantKindFilter(admin.SimpleListFilter):
    """The kinds of object one grants on, widest first."""

    title = "object type"
    parameter_name = "on"

    def lookups(self, request, model_admin):
        return [(scope, kind_name(scope)) for scope in scopes.names()]

    def queryset(self, request, queryset):
        if self.value() in scopes.names():
            return queryset.filter(content_type=scopes.content_type(self.value()))
        return queryset


class GrantAdmin(admin.ModelAdmin):
    """Grants are added and revoked, never edited: revoke and grant again instead."""

    principal = "user"
    list_display = ["role_name", "principal_name", "object_type", "object_pk", "scope_name"]
    list_filter = [GrantKindFilter]
    list_select_related = ["permission", "content_type"]

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        picker = path(
            "objects/",
            self.admin_site.admin_view(self.picker_view),
            name="{}_{}_objects".format(*info),
        )
        return [picker, *super().get_urls()]

    def picker_view(self, request):
        """The picker's answers (select2's JSON): the objects matching ``term`` that the admin
        may grant on, grouped by kind, ``PICKER_PAGE_SIZE`` of each kind a page."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        term = request.GET.get("term", "").strip()
        page = request.GET.get("page", "1")
        start = (int(page) - 1 if page.isdigit() and int(page) > 0 else 0) * PICKER_PAGE_SIZE
        groups, more = [], False
        for scope in scopes.names():
            found = grantable(scope, request.user)
            if term and not (scope == "system" and term.lower() in SYSTEM_LABEL.lower()):
                found = found.filter(name__icontains=term)
            objects = list(found.order_by("name", "pk")[start : start + PICKER_PAGE_SIZE + 1])
            more |= len(objects) > PICKER_PAGE_SIZE
            children = [
                {"id": object_value(scope, obj), "text": object_label(scope, obj)}
                for obj in objects[:PICKER_PAGE_SIZE]
            ]
            if children:
                group = "System" if scope == "system" else kind_name(scope, plural=True)
                groups.append({"text": group, "children": children})
        return JsonResponse({"results": groups, "pagination": {"more": more}})

    def get_form(self, request, obj=None, **kwargs):
        info = self.opts.app_label, self.opts.model_name
        kwargs["form"] = type(
            "Form",
            (GrantForm,),
            {
                "Meta": type("Meta", (), {"model": self.model, "fields": [self.principal]}),
                "granted_by": request.user,
                "picker_url": reverse("admin:{}_{}_objects".format(*info)),
            },
        )
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        """The form's fields to add a grant; a grant's own page shows what it holds."""
        if obj is not None:
            return [self.principal, "role_name", "granted_on"]
        return [self.principal, "role", "object"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .filter(permission__codename__startswith="role_")
            .filter(grant_service.visible_grants_filter(request.user, self.model.__mro__[1]))
        )

    @admin.display(description="role")
    def role_name(self, obj):
        return human_role_name(obj.permission.name.removeprefix("Holds role "))

    @admin.display(description="to")
    def principal_name(self, obj):
        return str(getattr(obj, self.principal))

    @admin.display(description="object type")
    def object_type(self, obj):
        return kind_name(scopes.of_model(obj.content_type.model_class()))

    @admin.display(description="object")
    def scope_name(self, obj):
        return str(obj.content_object)

    @admin.display(description="on")
    def granted_on(self, obj):
        target = obj.content_object
        if target is None:
            return "—"
        return object_label(scopes.of_model(obj.content_type.model_class()), target)

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
        grant, _ = grant_service.grant_role(
            data["role"],
            data["object"],
            granted_by=request.user,
            **{self.principal: data[self.principal]},
        )
        saved = self.model.objects.get(pk=int(grant.id[1:]))
        obj.__dict__.update({k: v for k, v in saved.__dict__.items() if not k.startswith("_")})


@admin.register(UserGrant)
class UserGrantAdmin(GrantAdmin):
    principal = "user"
    search_fields = ["user__username", "permission__name"]


@admin.register(GroupGrant)
class GroupGrantAdmin(GrantAdmin):
    principal = "group"
    search_fields = ["group__name", "permission__name"]
