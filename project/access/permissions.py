"""The one permission path: which objects a user may act on, through role grants at scopes.

A grant gives a role (a set of actions such as ``hosts.start_virtualmachine``) to a user or a
group on a scope object: the System, a cluster, a pool, a VM or a lease. A grant covers the
scope object and everything inside it; what is inside what is declared by each model as
``grant_scopes``, a mapping from scope name to the field that holds that scope's primary key::

    class VirtualMachine(models.Model):
        grant_scopes = {"vm": "pk", "cluster": "cluster_id", "pool": "pool_id"}

Every model is inside the System. ``restrict()`` turns this into one SQL query for a list;
``holds()`` answers for one object, saved or not (to check a create before it happens).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AnonymousUser, Permission
from django.db.models import BigIntegerField, Exists, Model, Q, QuerySet
from django.db.models.functions import Cast
from guardian.models import GroupObjectPermission, UserObjectPermission

from project.access import scopes
from project.models import Role, System


def default_action(model: type[Model], verb: str) -> str:
    """The Django permission name of a default action: ``hosts.view_cluster``."""
    return f"{model._meta.app_label}.{verb}_{model._meta.model_name}"


def split_action(action: str) -> tuple[str, str]:
    """An action's app label and codename: ``("hosts", "view_cluster")``."""
    app_label, _, codename = action.partition(".")
    if not codename:
        raise ValueError(f"An action is 'app_label.codename', not {action!r}.")
    return app_label, codename


def _role_codenames(action: str, also: str | None = None) -> QuerySet:
    """The guardian codenames of every role that includes ``action`` (and ``also``, if
    given), as a subquery."""
    roles = Role.objects.all()
    for wanted in (action, also):
        if wanted is not None:
            app_label, codename = split_action(wanted)
            roles = roles.filter(
                actions__content_type__app_label=app_label, actions__codename=codename
            )
    return roles.values("grant_codename")


def scope_requirement(model: type[Model], scope: str) -> str | None:
    """The action a role must also hold for a grant at ``scope`` to reach ``model``'s rows.

    A pool grant reaches the pool's VMs only for roles that manage the pool: UserRole on a
    pool lets a user take VMs from it, not see or use the VMs other users took. The scope
    object itself needs nothing more.
    """
    if scopes.of_model(model) == scope:
        return None
    return scopes.get(scope).contents_need


def _grants(
    user, action: str, scope: str | None, also: str | None = None
) -> tuple[QuerySet, QuerySet]:
    """Guardian rows granting ``action`` to ``user`` (directly, and through groups) at
    ``scope`` (None: at any scope)."""
    where = {} if scope is None else {"content_type": scopes.content_type(scope)}
    codenames = _role_codenames(action, also)
    direct = UserObjectPermission.objects.filter(
        user=user, permission__codename__in=codenames, **where
    )
    through_groups = GroupObjectPermission.objects.filter(
        group__user=user, permission__codename__in=codenames, **where
    )
    return direct, through_groups


def _granted_pks(rows: QuerySet) -> QuerySet:
    return rows.annotate(granted_pk=Cast("object_pk", BigIntegerField())).values("granted_pk")


def is_unprivileged(user) -> bool:
    """Whether ``user`` holds nothing whatever its grants: none, anonymous or inactive."""
    return user is None or isinstance(user, AnonymousUser) or not user.is_active


def scope_paths(model: type[Model]) -> dict[str, tuple[str, ...]]:
    """The model's ``grant_scopes`` with every value as a tuple of paths (one or several)."""
    return {
        scope: (paths,) if isinstance(paths, str) else tuple(paths)
        for scope, paths in getattr(model, "grant_scopes", {}).items()
    }


def restrict(queryset: QuerySet, user, action: str) -> QuerySet:
    """The rows of ``queryset`` on which ``user`` may perform ``action``, in one SQL query.

    Superusers may do everything; inactive and anonymous users nothing.
    """
    if is_unprivileged(user):
        return queryset.none()
    if user.is_superuser:
        return queryset
    return queryset.filter(grant_condition(queryset.model, user, action))


# Models whose rows a rule of their own shows, beyond grants alone (a user's own template is
# seen by them and the admins of its cluster only): model -> rule(queryset, user).
_view_rules: dict[type[Model], Callable[[QuerySet, Any], QuerySet]] = {}


def register_view_rule(model: type[Model], rule: Callable[[QuerySet, Any], QuerySet]) -> None:
    """Let ``rule(queryset, user)`` say which rows of ``model`` a user sees wherever the shared
    machinery restricts by the view action: the API's lists, related fields and filters, the
    admin console's lists and choices (``viewable``). An app registers it from ``ready()``."""
    _view_rules[model] = rule


def viewable(queryset: QuerySet, user) -> QuerySet:
    """The rows of ``queryset`` that ``user`` may see: by the model's own rule when it has one
    (``register_view_rule``), else by ``restrict()`` with its view action."""
    rule = _view_rules.get(queryset.model)
    if rule is not None:
        return rule(queryset, user)
    return restrict(queryset, user, default_action(queryset.model, "view"))


def grant_condition(model: type[Model], user, action: str) -> Q:
    """The filter behind ``restrict()``, to combine with others (one sub-select per scope)."""
    if is_unprivileged(user):
        return Q(pk__in=[])
    if user.is_superuser:
        return Q()
    direct, through_groups = _grants(user, action, "system")
    condition = Q(Exists(direct)) | Q(Exists(through_groups))
    shared = shared_scopes(model, action)
    for scope, paths in scope_paths(model).items():
        direct, through_groups = _grants(user, action, scope, scope_requirement(model, scope))
        for path in paths:
            lookup = f"{path}__in"
            condition |= Q(**{lookup: _granted_pks(direct)})
            condition |= Q(**{lookup: _granted_pks(through_groups)})
            if scope in shared:
                # A row outside every object of this scope is shared by all of them: whoever
                # holds the action anywhere may use it.
                anywhere_direct, anywhere_groups = _grants(user, action, None)
                condition |= Q(**{f"{path}__isnull": True}) & (
                    Q(Exists(anywhere_direct)) | Q(Exists(anywhere_groups))
                )
    return condition


def _resolve(obj: Model, path: str) -> Any:
    value: Any = obj
    for part in path.split("__"):
        if value is None:
            return None
        value = getattr(value, part)
    return value


def scope_keys(obj: Model) -> dict[str, set[Any]]:
    """The scopes that contain ``obj`` (saved or not), as scope name -> primary keys."""
    keys: dict[str, set[Any]] = {}
    for scope, paths in scope_paths(type(obj)).items():
        values = {_resolve(obj, path) for path in paths} - {None}
        if values:
            keys[scope] = values
    return keys


def shared_scopes(model: type[Model], action: str | None) -> set[str]:
    """Scopes whose unset key means "shared by all", for the actions sharing allows.

    A template without a cluster may be *used* wherever templates may be used, but changing
    or deleting it touches every cluster, so that takes a system-wide grant.
    """
    if action is None or action not in getattr(model, "grant_shared_actions", set()):
        return set()
    return set(getattr(model, "grant_shared_scopes", set()))


def _scope_filter(obj: Model, action: str | None = None) -> Q:
    """Guardian rows on the System or on any scope object that contains ``obj``."""
    where = Q(content_type=scopes.content_type("system"))
    keys = scope_keys(obj)
    for scope, values in keys.items():
        at_scope = Q(
            content_type=scopes.content_type(scope), object_pk__in=[str(v) for v in values]
        )
        requirement = scope_requirement(type(obj), scope)
        if requirement is not None:
            at_scope &= Q(permission__codename__in=_role_codenames(requirement))
        where |= at_scope
    if shared_scopes(type(obj), action) - keys.keys():
        where = Q()  # shared by all: a grant of the action anywhere will do
    return where


def holds(user, action: str, obj: Model | None = None) -> bool:
    """Whether ``user`` may perform ``action`` on ``obj`` (anywhere, when ``obj`` is None)."""
    if is_unprivileged(user):
        return False
    if user.is_superuser:
        return True
    codenames = _role_codenames(action)
    where = Q() if obj is None else _scope_filter(obj, action)
    for rows in (
        UserObjectPermission.objects.filter(user=user),
        GroupObjectPermission.objects.filter(group__user=user),
    ):
        if rows.filter(where, permission__codename__in=codenames).exists():
            return True
    return False


def _destination(obj: Model) -> tuple[list[str], list[str]]:
    """Where ``obj`` would be, in words: the scope objects holding it ("cluster cl-2") and the
    scopes it would be shared by ("cluster", for a template without one)."""
    model = type(obj)
    inside, shared_by = [], []
    for scope, values in scope_keys(obj).items():
        if scope == scopes.of_model(model):
            continue  # the object itself
        holder = scopes.model(scope)
        names = ", ".join(str(o) for o in holder._default_manager.filter(pk__in=values))
        inside.append(f"{holder._meta.verbose_name} {names}")
    for scope in sorted(getattr(model, "grant_shared_scopes", set()) - scope_keys(obj).keys()):
        shared_by.append(str(scopes.model(scope)._meta.verbose_name))
    return inside, shared_by


def placement_refusal(
    user, obj: Model, stored_keys: dict[str, set[Any]] | None = None
) -> str | None:
    """Why ``user`` may not write ``obj`` (as it will be saved) where it would be; None if they
    may.

    A new object (``stored_keys`` None) needs the add action where it will be. An object whose
    scopes change (``stored_keys``: ``scope_keys()`` of the stored row) needs there what making
    it there would, the add action, and the change action: moving a host into another cluster
    puts a new host in that cluster. An object that stays where it is needs nothing more than
    the change action already checked on it.
    """
    moving = stored_keys is not None
    if moving and scope_keys(obj) == stored_keys:
        return None
    verbs = ("add", "change") if moving else ("add",)
    if all(holds(user, default_action(type(obj), verb), obj) for verb in verbs):
        return None
    name = obj._meta.verbose_name
    inside, shared_by = _destination(obj)
    if shared_by:
        where = "shared by every " + " and every ".join(shared_by)
        what = f"make this {name} {where}" if moving else f"add a {name} {where}"
        return f"You may not {what}: that needs a system-wide grant."
    place = ", ".join(inside)
    if not moving:
        return f"You may not add a {name} in {place}." if place else f"You may not add a {name}."
    plural = obj._meta.verbose_name_plural
    return (
        f"You may not move this {name}"
        + (f" to {place}" if place else "")
        + f": that needs the right to add and change {plural} there."
    )


def holds_at_system(user, action: str) -> bool:
    """Whether ``user`` may perform ``action`` system-wide (a grant on the System)."""
    return holds(user, action, System(pk=1))


def held_actions(user, obj: Model) -> set[str]:
    """Every action ``user`` holds on ``obj`` through grants on it or around it (two queries)."""
    if is_unprivileged(user):
        return set()
    where = _scope_filter(obj)
    codenames = (
        UserObjectPermission.objects.filter(where, user=user)
        .values("permission__codename")
        .union(
            GroupObjectPermission.objects.filter(where, group__user=user).values(
                "permission__codename"
            )
        )
    )
    roles = Role.objects.filter(
        grant_codename__in=[row["permission__codename"] for row in codenames]
    )
    return {
        f"{app_label}.{codename}"
        for app_label, codename in roles.values_list(
            "actions__content_type__app_label", "actions__codename"
        )
        if codename
    }


class RoleBackend:
    """Django authentication backend answering ``user.has_perm(action, obj)`` from role grants.

    Without an object, it answers whether the user may perform the action anywhere, which is
    what the admin asks before showing a list (the list itself is restricted).
    """

    def authenticate(self, request, **credentials):
        return None

    def has_perm(self, user_obj, perm: str, obj: Model | None = None) -> bool:
        return holds(user_obj, perm, obj)

    def has_module_perms(self, user_obj, app_label: str) -> bool:
        if is_unprivileged(user_obj):
            return False
        if user_obj.is_superuser:
            return True
        roles = Role.objects.filter(actions__content_type__app_label=app_label).values(
            "grant_codename"
        )
        return (
            UserObjectPermission.objects.filter(
                user=user_obj, permission__codename__in=roles
            ).exists()
            or GroupObjectPermission.objects.filter(
                group__user=user_obj, permission__codename__in=roles
            ).exists()
        )

    def get_all_permissions(self, user_obj, obj=None) -> set[str]:
        return set()


def permission_for(action: str) -> Permission:
    app_label, codename = split_action(action)
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)
