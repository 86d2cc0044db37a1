"""``holds()`` for the row a hot request reads, written as SQL to select with that row.

A detail request that must also know what the caller may do there (taking a VM from a pool)
reads both in one statement: ``holds_sql`` gives the boolean column. It says what
``project.access.permissions.holds`` says (the same grants at the system, at the row's own scope
objects, with each scope's ``contents_need``); it is written as SQL because building the
same thing from ORM expressions cost more Python time, on every request, than the database
spends answering it.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model
from guardian.models import GroupObjectPermission, UserObjectPermission

from project.access import scopes
from project.access.permissions import (
    is_unprivileged,
    scope_paths,
    scope_requirement,
    shared_scopes,
    split_action,
)
from project.models import Role


def _roles_with(action: str) -> tuple[str, list]:
    """SQL for the grant codenames of every role that includes ``action``."""
    app_label, codename = split_action(action)
    return (
        f"SELECT r.grant_codename FROM {Role._meta.db_table} r"
        f" JOIN {Role.actions.through._meta.db_table} ra ON ra.role_id = r.id"
        f" JOIN {Permission._meta.db_table} ap ON ap.id = ra.permission_id"
        f" JOIN {ContentType._meta.db_table} ct ON ct.id = ap.content_type_id"
        " WHERE ct.app_label = %s AND ap.codename = %s",
        [app_label, codename],
    )


def holds_sql(model: type[Model], user, action: str, alias: str) -> tuple[str, list]:
    """A boolean SQL expression (and its parameters): whether ``user`` may perform ``action``
    on the ``model`` row the enclosing query names ``alias``."""
    if is_unprivileged(user):
        return "(1 = 0)", []
    if user.is_superuser:
        return "(1 = 1)", []
    if shared_scopes(model, action):
        raise ValueError(f"{model.__name__}'s shared rows are not served here for {action}")
    where, params = ["g.content_type_id = %s"], [scopes.content_type("system").pk]
    for scope, paths in scope_paths(model).items():
        requirement = scope_requirement(model, scope)
        for path in paths:
            field = model._meta.pk if path == "pk" else model._meta.get_field(path)
            column = field.column
            at_scope = f"g.content_type_id = %s AND g.object_pk = CAST({alias}.{column} AS TEXT)"
            at_params = [scopes.content_type(scope).pk]
            if requirement is not None:
                roles, role_params = _roles_with(requirement)
                at_scope += f" AND p.codename IN ({roles})"
                at_params += role_params
            where.append(f"({at_scope})")
            params += at_params
    roles, role_params = _roles_with(action)
    grants = (
        f" JOIN {Permission._meta.db_table} p ON p.id = g.permission_id"
        f" WHERE p.codename IN ({roles}) AND ({' OR '.join(where)})"
    )
    groups = get_user_model().groups.through._meta.db_table
    sql = (
        f"(EXISTS (SELECT 1 FROM {UserObjectPermission._meta.db_table} g{grants}"
        " AND g.user_id = %s)"
        f" OR EXISTS (SELECT 1 FROM {GroupObjectPermission._meta.db_table} g"
        f" JOIN {groups} ug ON ug.group_id = g.group_id{grants} AND ug.user_id = %s))"
    )
    return sql, [*role_params, *params, user.pk, *role_params, *params, user.pk]
