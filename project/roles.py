"""The built-in roles, and keeping them (and every role's grant permissions) in the database.

Built-in roles are locked: after every ``migrate`` their actions are reset to what this module
says. Admins may add roles of their own through the API or the admin.
"""

from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import transaction

from project import scopes

# Apps whose permissions are Corral actions.
ACTION_APPS = ("project", "hosts", "scheduling", "pools", "leases")

VM_USE = [
    "hosts.view_virtualmachine",
    "hosts.operate_virtualmachine",
    "hosts.view_job",
    "hosts.cancel_job",
]
VM_MANAGE = VM_USE + [
    "hosts.change_virtualmachine",
    "hosts.delete_virtualmachine",
    "hosts.migrate_virtualmachine",
]

BUILTIN_ROLES: dict[str, dict] = {
    "SuperUser": {
        "description": "Every action on everything in its scope, including users and roles.",
        "actions": "__all__",
    },
    "ClusterAdmin": {
        "description": "Manages clusters: hosts, templates, VMs, pools and grants in them.",
        "actions": [
            "hosts.view_cluster",
            "hosts.add_cluster",
            "hosts.change_cluster",
            "hosts.delete_cluster",
            "hosts.view_host",
            "hosts.add_host",
            "hosts.change_host",
            "hosts.delete_host",
            "hosts.view_externaldomain",
            "hosts.view_template",
            "hosts.add_template",
            "hosts.change_template",
            "hosts.delete_template",
            "hosts.add_virtualmachine",
            *VM_MANAGE,
            "pools.view_vmpool",
            "pools.add_vmpool",
            "pools.change_vmpool",
            "pools.delete_vmpool",
            "pools.allocate_vmpool",
            "pools.return_vmpool",
            "scheduling.view_affinitygroup",
            "scheduling.add_affinitygroup",
            "scheduling.change_affinitygroup",
            "scheduling.delete_affinitygroup",
            "scheduling.view_policy",
            "scheduling.view_policyunit",
            "project.manage_grants",
        ],
    },
    "PoolAdmin": {
        "description": "Manages VM pools and their VMs, and grants users the use of them.",
        "actions": [
            # A pool is created in a cluster, which the creator must be able to name.
            "hosts.view_cluster",
            "pools.view_vmpool",
            "pools.add_vmpool",
            "pools.change_vmpool",
            "pools.delete_vmpool",
            "pools.allocate_vmpool",
            "pools.return_vmpool",
            *VM_MANAGE,
            "hosts.view_template",
            "project.manage_grants",
        ],
    },
    "PolicyAdmin": {
        "description": "Manages scheduling policies and the clusters' choice of policy.",
        "actions": ["hosts.view_cluster", "hosts.change_cluster", "hosts.view_host"],
        "apps": ["scheduling"],
    },
    "PowerUser": {
        "description": "Creates VMs; becomes UserVmManager of each VM it creates.",
        "actions": ["hosts.view_cluster", "hosts.view_template", "hosts.add_virtualmachine"],
    },
    "UserVmManager": {
        "description": "Uses, changes and deletes the VMs it is granted on.",
        "actions": VM_MANAGE,
    },
    "UserRole": {
        "description": "Uses the VMs granted to it, and takes VMs from the pools granted to it.",
        "actions": [*VM_USE, "pools.view_vmpool", "pools.allocate_vmpool"],
    },
    "LeaseUser": {
        "description": "Creates leases; becomes LeaseOwner of each lease it creates.",
        "actions": ["leases.add_lease"],
    },
    "LeaseOwner": {
        "description": "Sees, changes and deletes the leases it is granted on, and uses their VMs.",
        "actions": [
            "leases.view_lease",
            "leases.change_lease",
            "leases.delete_lease",
            "leases.view_reservation",
            "hosts.add_virtualmachine",
            "hosts.view_template",
            *VM_USE,
        ],
    },
}


def _actions_for(spec: dict) -> list[Permission]:
    permissions = Permission.objects.select_related("content_type")
    if spec["actions"] == "__all__":
        return list(
            permissions.filter(content_type__app_label__in=ACTION_APPS + ("auth",)).exclude(
                codename__startswith="role_"
            )
        )
    wanted = set(spec["actions"])
    found = [
        p
        for p in permissions.filter(content_type__app_label__in=ACTION_APPS)
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
    from django.apps import apps

    from project.models import Role, System

    if sender is not None and sender is not list(apps.get_app_configs())[-1]:
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
