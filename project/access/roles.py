"""The built-in roles, and keeping them (and every role's grant permissions) in the database.

Built-in roles are locked: after every ``migrate`` their actions are reset to what this module
says. Admins may add roles of their own through the API or the admin.
"""

from django.apps import apps
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import transaction

from project.access import scopes
from project.models import Role, System

# Apps whose permissions are Corral actions: project's own, and each app that defines or
# extends a role (``define``/``contribute`` from its ``AppConfig.ready()``).
_action_apps: list[str] = ["project"]

# Role name -> {"description", "actions": [action, ...] or "__all__", "apps": [app label, ...]}.
# ``apps`` gives a role every action of those apps. Filled by the apps as they get ready.
BUILTIN_ROLES: dict[str, dict] = {
    "SuperUser": {
        "description": "Every action on everything in its scope, including users and roles.",
        "actions": "__all__",
    },
}


def action_apps() -> tuple[str, ...]:
    return tuple(_action_apps)


def _note_app(action: str) -> None:
    app_label = action.partition(".")[0]
    if app_label not in _action_apps:
        _action_apps.append(app_label)


def define(name: str, description: str, actions: list[str] = (), *, apps: list[str] = ()) -> None:
    """A built-in role and its actions (an app's own role, from its ``ready()``)."""
    spec = BUILTIN_ROLES.setdefault(name, {"actions": [], "apps": []})
    spec["description"] = description
    contribute(name, actions, apps=apps)


def contribute(name: str, actions: list[str] = (), *, apps: list[str] = ()) -> None:
    """Give a built-in role (defined here or by another app) more actions: an app adds its
    own actions to the roles that reach its objects (pools add theirs to ClusterAdmin)."""
    spec = BUILTIN_ROLES.setdefault(name, {"description": "", "actions": [], "apps": []})
    for action in actions:
        if action not in spec["actions"]:
            spec["actions"].append(action)
        _note_app(action)
    for app_label in apps:
        spec.setdefault("apps", []).append(app_label)
        if app_label not in _action_apps:
            _action_apps.append(app_label)


def _actions_for(spec: dict) -> list[Permission]:
    permissions = Permission.objects.select_related("content_type")
    if spec["actions"] == "__all__":
        return list(
            permissions.filter(content_type__app_label__in=action_apps() + ("auth",)).exclude(
                codename__startswith="role_"
            )
        )
    wanted = set(spec["actions"])
    found = [
        p
        for p in permissions.filter(content_type__app_label__in=action_apps())
        if f"{p.content_type.app_label}.{p.codename}" in wanted
        or p.content_type.app_label in spec.get("apps", ())
    ]
    found = [p for p in found if not p.codename.startswith("role_")]
    missing = wanted - {f"{p.content_type.app_label}.{p.codename}" for p in found}
    if missing:
        raise LookupError(f"Built-in role actions missing from the database: {sorted(missing)}")
    return found


def ensure_grant_permissions(role) -> None:
    """Create the guardian permission ``role_<name>`` on every scope model, once."""
    for scope in scopes.names():
        content_type = ContentType.objects.get_for_model(scopes.model(scope))
        Permission.objects.get_or_create(
            content_type=content_type,
            codename=role.grant_codename,
            defaults={"name": f"Holds role {role.name}"[:255]},
        )


def delete_grant_permissions(role) -> None:
    """Remove a role's guardian permissions, and with them every grant of the role."""
    Permission.objects.filter(codename=role.grant_codename).delete()


def sync_builtin_roles(sender=None, **kwargs) -> None:
    """post_migrate: create or reset the built-in roles; make sure every role can be granted.

    post_migrate is sent once per app, in INSTALLED_APPS order, and each app's permissions are
    created on its own signal: run once, after the last app, when they all exist.
    """
    # Only apps with models get the signal (the lab, last when installed, has none).
    with_models = [config for config in apps.get_app_configs() if config.models_module is not None]
    if sender is not None and sender is not with_models[-1]:
        return

    with transaction.atomic():
        System.get()
        for name, spec in BUILTIN_ROLES.items():
            role, _ = Role.objects.update_or_create(
                name=name, defaults={"description": spec["description"], "builtin": True}
            )
            role.actions.set(_actions_for(spec))
        for role in Role.objects.all():
            ensure_grant_permissions(role)
