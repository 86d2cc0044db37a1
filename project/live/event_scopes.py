"""Who may see an event, decided without a query per event: keys on both sides.

An event carries its scope keys, written with it (``event_keys``): "system", one key per scope
field it has ("cluster:3", "vm:12", ...) and "user:5" for the user it concerns. A reader holds
the keys its grants cover (``reader_keys``), read once from its grants, each prefixed by the
object type whose view action the grant gives ("vm cluster:3": the user sees VM events of
cluster 3). ``sees`` matches the two: the same answer as ``events.visible_events``' query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.contrib.auth.models import AnonymousUser
from guardian.models import GroupObjectPermission, UserObjectPermission

from project.access import scopes
from project.models import Event, Role

# A reader's keys; None: every event (a superuser).
ReaderKeys = frozenset[str] | None


def event_keys(fields: Mapping) -> list[str]:
    """The keys of an event with these field values (``Event.grant_scopes`` and ``user_id``)."""
    keys = ["system"]
    for scope, field in Event.grant_scopes.items():
        value = fields.get(field)
        if value is not None:
            keys.append(f"{scope}:{value}")
    if fields.get("user_id") is not None:
        keys.append(f"user:{fields['user_id']}")
    return keys


def reader_keys(user, view_actions: Mapping[str, str]) -> ReaderKeys:
    """The keys ``user``'s grants cover for events of each object type in ``view_actions``
    (object type -> the action that lets one see them). Three queries."""
    if user.is_superuser:
        return None
    keys = {f"user:{user.pk}"}
    if isinstance(user, AnonymousUser) or not user.is_active:
        return frozenset(keys)
    scope_of_type = {scopes.content_type(name).pk: name for name in scopes.names()}
    grants = list(
        UserObjectPermission.objects.filter(user=user).values_list(
            "content_type_id", "object_pk", "permission__codename"
        )
    ) + list(
        GroupObjectPermission.objects.filter(group__user=user).values_list(
            "content_type_id", "object_pk", "permission__codename"
        )
    )
    actions: dict[str, set[str]] = {}
    rows = Role.objects.filter(grant_codename__in={codename for _, _, codename in grants})
    for codename, app_label, action in rows.values_list(
        "grant_codename", "actions__content_type__app_label", "actions__codename"
    ):
        if action:
            actions.setdefault(codename, set()).add(f"{app_label}.{action}")
    for content_type_id, object_pk, codename in grants:
        scope = scope_of_type.get(content_type_id)
        held = actions.get(codename, set())
        if scope is None:
            continue
        for object_type, view_action in view_actions.items():
            if view_action not in held:
                continue
            if scope == "system":
                keys.add(f"{object_type} system")
                continue
            # Inside a scope object, as for any model that is not the scope itself, some
            # scopes reach their contents only for roles that also hold another action.
            need = scopes.get(scope).contents_need
            if need is None or need in held:
                keys.add(f"{object_type} {scope}:{object_pk}")
    return frozenset(keys)


def sees(keys: ReaderKeys, object_type: str, event_scope_keys: Iterable[str]) -> bool:
    """Whether a reader holding ``keys`` may see an event of ``object_type`` with these keys."""
    if keys is None:
        return True
    return any(key in keys or f"{object_type} {key}" in keys for key in event_scope_keys)
