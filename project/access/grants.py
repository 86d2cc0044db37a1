"""Granting and revoking roles, and listing grants, on django-guardian's object permissions.

A grant is a guardian row (``UserObjectPermission`` or ``GroupObjectPermission``) holding the
permission ``role_<name>`` on a scope object. Its public id names the table and the row:
``u12`` for a grant to a user, ``g7`` for a grant to a group.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import (
    Case,
    CharField,
    F,
    IntegerField,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Cast
from guardian.models import GroupObjectPermission, UserObjectPermission

from project.access import scopes
from project.access.permissions import (
    default_action,
    held_actions,
    restrict,
)
from project.models import Role, System, grant_codename_for

User = get_user_model()
MANAGE_GRANTS = "project.manage_grants"


@dataclass(frozen=True)
class Grant:
    """One role held by one user or group on one scope object."""

    id: str
    role: Role
    user: object | None
    group: Group | None
    object_type: str
    object_id: int | None
    object_name: str


def scope_object(object_type: str, object_id: int | None, *, seen_by=None) -> Model:
    """The scope object a grant would attach to; ValidationError when there is none.

    With ``seen_by``, an object that user may not see is reported as missing too, so that
    trying to grant on it does not reveal that it exists.
    """
    if object_type not in scopes.names():
        raise ValidationError(
            {"object_type": f"Unknown object type; expected one of {', '.join(scopes.names())}."}
        )
    if object_type == "system":
        if object_id is not None:
            raise ValidationError({"object_id": "A system grant has no object id."})
        return System.get()
    if object_id is None:
        raise ValidationError({"object_id": f"Say which {object_type} the grant is on."})
    model = scopes.model(object_type)
    found = model.objects.filter(pk=object_id)
    if seen_by is not None:
        found = restrict(found, seen_by, default_action(model, "view"))
    obj = found.first()
    if obj is None:
        raise ValidationError({"object_id": f"No {object_type} with id {object_id}."})
    return obj


def check_may_grant(granted_by, role: Role, obj: Model) -> None:
    """PermissionDenied unless ``granted_by`` may manage grants on ``obj`` and holds every
    action of ``role`` there."""
    if granted_by.is_superuser:
        return
    held = held_actions(granted_by, obj)
    if MANAGE_GRANTS not in held:
        raise PermissionDenied("You may not grant roles on this object.")
    wanted = {
        f"{p.content_type.app_label}.{p.codename}"
        for p in role.actions.select_related("content_type")
    }
    if not wanted <= held:
        raise PermissionDenied(
            f"You may only grant roles whose actions you hold here; "
            f"{role.name} has actions you do not."
        )


@transaction.atomic
def grant_role(
    role: Role, obj: Model, *, user=None, group: Group | None = None, granted_by=None
) -> tuple[Grant, bool]:
    """Give ``role`` on ``obj`` to one user or one group. Idempotent: returns (grant, created).

    With ``granted_by``, refuses unless that user may manage grants on ``obj`` and holds every
    action of the role there (no one hands out more than they have).
    """
    if (user is None) == (group is None):
        raise ValidationError("A grant goes to exactly one user or one group.")
    if granted_by is not None:
        check_may_grant(granted_by, role, obj)
    permission = Permission.objects.get(
        content_type=ContentType.objects.get_for_model(type(obj)), codename=role.grant_codename
    )
    if user is not None:
        row, created = UserObjectPermission.objects.get_or_create(
            user=user,
            permission=permission,
            content_type=permission.content_type,
            object_pk=str(obj.pk),
        )
        grant_id = f"u{row.pk}"
    else:
        row, created = GroupObjectPermission.objects.get_or_create(
            group=group,
            permission=permission,
            content_type=permission.content_type,
            object_pk=str(obj.pk),
        )
        grant_id = f"g{row.pk}"
    return get_grant(grant_id), created


def add_user_grant(role_name: str, obj: Model, user) -> None:
    """Give ``user`` the role named ``role_name`` on ``obj`` in one statement, nothing when
    they hold it already. No check and no answer: for a service that grants as one step of a
    bigger change (an allocation), where ``grant_role``'s lookups would cost more than the
    change itself. The permission is found by the insert itself, so nothing is cached.
    """
    content_type = ContentType.objects.get_for_model(type(obj))  # cached by Django
    table = UserObjectPermission._meta.db_table
    with connection.cursor() as cursor:
        # The WHERE is required: it tells SQLite the ON CONFLICT belongs to the INSERT.
        cursor.execute(
            f"INSERT INTO {table} (permission_id, content_type_id, object_pk, user_id) "
            f"SELECT id, content_type_id, %s, %s FROM {Permission._meta.db_table} "
            "WHERE content_type_id = %s AND codename = %s ON CONFLICT DO NOTHING",
            [str(obj.pk), user.pk, content_type.pk, grant_codename_for(role_name)],
        )


def _row_for(grant_id: str):
    kind, number = grant_id[:1], grant_id[1:]
    table = {"u": UserObjectPermission, "g": GroupObjectPermission}.get(kind)
    if table is None or not number.isdigit():
        return None
    return table.objects.filter(pk=int(number), permission__codename__startswith="role_").first()


def get_grant(grant_id: str) -> Grant | None:
    row = _row_for(grant_id)
    if row is None:
        return None
    return _to_grants([_row_values(row)])[0]


@transaction.atomic
def revoke(grant: Grant, *, revoked_by=None) -> None:
    """Remove a grant. With ``revoked_by``, refuses unless that user may manage grants there."""
    obj = scope_object(grant.object_type, grant.object_id)
    may_revoke = revoked_by is None or revoked_by.is_superuser
    if not may_revoke and MANAGE_GRANTS not in held_actions(revoked_by, obj):
        raise PermissionDenied("You may not revoke roles on this object.")
    row = _row_for(grant.id)
    if row is not None:
        row.delete()


def remove_grants_on(sender, instance, **kwargs) -> None:
    """post_delete of a scope model: remove every grant on the deleted object.

    Guardian keeps the object's key as text, not as a foreign key, so nothing cascades: the
    grant would outlive its object, still show in lists, and could not be revoked.
    """
    content_type = ContentType.objects.get_for_model(sender)
    for rows in (UserObjectPermission.objects, GroupObjectPermission.objects):
        rows.filter(content_type=content_type, object_pk=str(instance.pk)).delete()


def revoke_role(role: Role, obj: Model, *, user=None, group=None) -> None:
    """Remove ``role`` on ``obj`` from a user or a group, if they hold it there (no check)."""
    rows = UserObjectPermission.objects if user is not None else GroupObjectPermission.objects
    principal = {"user": user} if user is not None else {"group": group}
    rows.filter(
        **principal,
        permission__codename=role.grant_codename,
        content_type=ContentType.objects.get_for_model(type(obj)),
        object_pk=str(obj.pk),
    ).delete()


def _row_values(row) -> dict:
    is_user = isinstance(row, UserObjectPermission)
    return {
        "kind": "u" if is_user else "g",
        "id": row.pk,
        "codename": row.permission.codename,
        "content_type_id": row.content_type_id,
        "object_pk": row.object_pk,
        "principal_id": row.user_id if is_user else row.group_id,
    }


def visible_grants_filter(viewer, table: type[Model]) -> Q:
    """Which rows of a guardian table ``viewer`` may see: their own grants, and every grant on
    an object where they may manage grants (superusers: all)."""
    if viewer.is_superuser:
        return Q()
    own = Q(user=viewer) if table is UserObjectPermission else Q(group__user=viewer)
    managed = Q(pk__in=[])
    for scope in scopes.names():
        objects = restrict(scopes.model(scope).objects.all(), viewer, MANAGE_GRANTS)
        managed |= Q(
            content_type=scopes.content_type(scope),
            object_pk__in=objects.annotate(pk_text=Cast("pk", CharField())).values("pk_text"),
        )
    return own | managed


# ``?ordering=`` keys of the grant list -> the column each sorts on. Object types sort from the
# widest scope to the narrowest (system, cluster, pool, lease, VM); principals by user or
# group name, users and groups together.
GRANT_ORDERINGS = {
    "id": "id",
    "role": "role_name",
    "principal": "principal_name",
    "object_type": "scope_rank",
}


def _ordering_columns(kind: str, ordering: list[str]) -> dict:
    """The columns ``ordering`` sorts on, for the user rows (``kind`` "u") or group rows."""
    wanted = {key.lstrip("-") for key in ordering}
    columns: dict = {}
    if "role" in wanted:
        columns["role_name"] = Subquery(
            Role.objects.filter(grant_codename=OuterRef("permission__codename")).values("name")[:1]
        )
    if "principal" in wanted:
        columns["principal_name"] = F("user__username" if kind == "u" else "group__name")
    if "object_type" in wanted:
        columns["scope_rank"] = Case(
            *(
                When(content_type=scopes.content_type(scope), then=Value(rank))
                for rank, scope in enumerate(scopes.names())
            ),
            default=Value(len(scopes.names())),
            output_field=IntegerField(),
        )
    return columns


def grant_rows(
    viewer,
    *,
    ordering: list[str] | None = None,
    only_own: bool = False,
    role: Role | None = None,
    user=None,
    group: Group | None = None,
    object_type: str | None = None,
    object_id: int | None = None,
    grant_id: str | None = None,
) -> QuerySet:
    """The grants ``viewer`` may see, as one union query of plain values, ordered by id
    (or first by the ``GRANT_ORDERINGS`` keys in ``ordering``, "-" for descending).

    A user sees their own grants (directly and through their groups) and every grant on an
    object where they may manage grants; a superuser sees all. The keyword filters narrow it.
    """
    user_rows = UserObjectPermission.objects.filter(permission__codename__startswith="role_")
    group_rows = GroupObjectPermission.objects.filter(permission__codename__startswith="role_")
    narrow = Q()
    if role is not None:
        narrow &= Q(permission__codename=role.grant_codename)
    if object_type is not None:
        narrow &= Q(content_type=scopes.content_type(object_type))
    if object_id is not None:
        narrow &= Q(object_pk=str(object_id))
    user_rows, group_rows = user_rows.filter(narrow), group_rows.filter(narrow)
    if user is not None:
        group_rows = group_rows.none()
        user_rows = user_rows.filter(user=user)
    if group is not None:
        user_rows = user_rows.none()
        group_rows = group_rows.filter(group=group)
    if grant_id is not None:
        kind, number = grant_id[:1], int(grant_id[1:])
        user_rows = user_rows.filter(pk=number) if kind == "u" else user_rows.none()
        group_rows = group_rows.filter(pk=number) if kind == "g" else group_rows.none()
    if only_own:
        user_rows, group_rows = user_rows.filter(user=viewer), group_rows.filter(group__user=viewer)
    else:
        user_rows = user_rows.filter(visible_grants_filter(viewer, UserObjectPermission))
        group_rows = group_rows.filter(visible_grants_filter(viewer, GroupObjectPermission))
    ordering = list(ordering or [])
    by_user, by_group = _ordering_columns("u", ordering), _ordering_columns("g", ordering)
    columns = ("kind", "id", "codename", "content_type_id", "object_pk", "principal_id", *by_user)
    users = user_rows.annotate(
        kind=Value("u"), codename=F("permission__codename"), principal_id=F("user_id"), **by_user
    ).values(*columns)
    groups = group_rows.annotate(
        kind=Value("g"), codename=F("permission__codename"), principal_id=F("group_id"), **by_group
    ).values(*columns)
    keys = [
        ("-" if key.startswith("-") else "") + GRANT_ORDERINGS[key.lstrip("-")] for key in ordering
    ]
    return users.union(groups, all=True).order_by(*keys, "kind", "id")


def to_grants(rows) -> list[Grant]:
    return _to_grants(list(rows))


def _to_grants(rows: list[dict]) -> list[Grant]:
    """Turn raw rows into Grants with a constant number of queries (roles, principals, objects)."""
    roles = {role.grant_codename: role for role in Role.objects.all()}
    user_ids = {r["principal_id"] for r in rows if r["kind"] == "u"}
    group_ids = {r["principal_id"] for r in rows if r["kind"] == "g"}
    users = User.objects.in_bulk(user_ids) if user_ids else {}
    groups = Group.objects.in_bulk(group_ids) if group_ids else {}
    wanted: dict[int, set[int]] = defaultdict(set)
    for r in rows:
        wanted[r["content_type_id"]].add(int(r["object_pk"]))
    names: dict[tuple[int, int], str] = {}
    for content_type_id, pks in wanted.items():
        model = ContentType.objects.get_for_id(content_type_id).model_class()
        for pk, obj in model.objects.in_bulk(pks).items():
            names[(content_type_id, pk)] = str(obj)
    grants = []
    for r in rows:
        model = ContentType.objects.get_for_id(r["content_type_id"]).model_class()
        object_type = scopes.of_model(model)
        object_id = None if object_type == "system" else int(r["object_pk"])
        grants.append(
            Grant(
                id=f"{r['kind']}{r['id']}",
                role=roles.get(r["codename"]),
                user=users.get(r["principal_id"]) if r["kind"] == "u" else None,
                group=groups.get(r["principal_id"]) if r["kind"] == "g" else None,
                object_type=object_type,
                object_id=object_id,
                object_name=names.get((r["content_type_id"], int(r["object_pk"])), ""),
            )
        )
    return grants
