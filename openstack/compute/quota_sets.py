"""Corral's quotas (``hosts.quotas``) in Nova's words: a project's quota set (a project is a
user, its id the user's), the absolute figures of ``/limits``, a quota's refusal as Nova's
403, and an admin's changes to a user's own quota row.

Nova's ``instances``, ``cores`` and ``ram`` are Corral's ``vms``, ``vcpus`` and
``memory_mb``: each shows the user's effective limit (the most generous of the rows that
apply to them; -1 unlimited) and what they hold. Key pairs are limited per user
(``project.sshkeys``), server metadata to Nova's 128 items; what Corral does not limit (server
groups, their members, injected files, the network figures Nova answered before 2.36) is -1.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.exceptions import ParseError, PermissionDenied, ValidationError

from hosts import quotas
from hosts.models import Quota
from hosts.models.quotas import LIMIT_NAMES
from openstack.compute.bodies import MAX_METADATA
from openstack.models import NovaServerGroup
from project.models import SshKey
from project.sshkeys import MAX_KEYS_PER_USER

UNLIMITED = -1

# Nova's quota names of Corral's resources, which an admin sets through Nova's API.
NOVA_NAMES = {"vms": "instances", "vcpus": "cores", "memory_mb": "ram"}
CORRAL_NAMES = {nova: corral for corral, nova in NOVA_NAMES.items()}

# Nova's other quotas (before 2.36 with the network ones): what Corral answers for them.
FIXED = {
    "key_pairs": MAX_KEYS_PER_USER,
    "metadata_items": MAX_METADATA,
    "injected_files": UNLIMITED,
    "injected_file_content_bytes": UNLIMITED,
    "injected_file_path_bytes": UNLIMITED,
    "server_groups": UNLIMITED,
    "server_group_members": UNLIMITED,
}
NETWORK = ("fixed_ips", "floating_ips", "security_groups", "security_group_rules")


def nova_limit(limit: int | None) -> int:
    return UNLIMITED if limit is None else limit


def nova_refusal(exceeded: quotas.QuotaExceeded) -> PermissionDenied:
    """A quota's refusal as Nova words it (``TooManyInstances``), its status 403."""
    name = NOVA_NAMES.get(exceeded.resource, exceeded.resource)
    used, requested = quotas.amount(exceeded.used), quotas.amount(exceeded.requested)
    return PermissionDenied(
        f"Quota exceeded for {name}: Requested {requested}, but already used {used} "
        f"of {exceeded.limit} {name}"
    )


def project_user(project_id: str):
    """The user whose project ``project_id`` is; Nova's 400 for no such project."""
    user = None
    if project_id.isdigit() and len(project_id) < 19:
        user = get_user_model().objects.filter(pk=int(project_id)).first()
    if user is None:
        raise ParseError(f"Project ID {project_id} is not a valid project.")
    return user


def _shaped(values: dict, *, with_network: bool) -> dict:
    if with_network:
        values |= dict.fromkeys(NETWORK, UNLIMITED)
    return values


def quota_set(user, *, with_network: bool) -> dict:
    """``user``'s limits under Nova's names (``GET /os-quota-sets/{id}``)."""
    limits = quotas.effective_limits(user)
    values = {nova: nova_limit(limits[corral]) for corral, nova in NOVA_NAMES.items()}
    return _shaped(values | FIXED, with_network=with_network)


def default_set(*, with_network: bool) -> dict:
    """Everyone's limits before their own and their groups' rows (``/defaults``)."""
    limits = quotas.default_row_limits()
    values = {nova: nova_limit(limits[corral]) for corral, nova in NOVA_NAMES.items()}
    return _shaped(values | FIXED, with_network=with_network)


def detailed_set(user, *, with_network: bool) -> dict:
    """Each quota's limit, use and (always 0, as Nova's since Queens) reservation
    (``/detail``)."""
    used = quotas.usage(user)
    in_use = {
        "instances": used.vms,
        "cores": used.vcpus,
        "ram": used.memory_mb,
        "key_pairs": SshKey.objects.filter(owner=user).count(),
        "server_groups": NovaServerGroup.objects.filter(user=user).count(),
    }
    limits = quota_set(user, with_network=with_network)
    return {
        name: {"limit": limit, "in_use": in_use.get(name, 0), "reserved": 0}
        for name, limit in limits.items()
    }


def absolute_figures(user) -> dict:
    """``/limits``' figures of what the quota system limits (two statements)."""
    limits, used = quotas.effective_limits(user), quotas.usage(user)
    return {
        "maxTotalInstances": nova_limit(limits["vms"]),
        "maxTotalCores": nova_limit(limits["vcpus"]),
        "maxTotalRAMSize": nova_limit(limits["memory_mb"]),
        "totalInstancesUsed": used.vms,
        "totalCoresUsed": used.vcpus,
        "totalRAMUsed": used.memory_mb,
    }


def _wanted(body: dict) -> tuple[dict, bool]:
    """The Corral limits a ``quota_set`` body sets, and whether it forces them."""
    force = str(body.get("force", "false")).strip().lower() in ("1", "true", "yes", "on")
    wanted = {}
    for key, value in body.items():
        if key == "force":
            continue
        if key not in CORRAL_NAMES and key not in FIXED and key not in NETWORK:
            raise ValidationError(
                {"quota_set": f"Additional properties are not allowed ({key!r})."}
            )
        if value is None or (not value and value != 0):
            continue
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ValidationError({f"quota_set.{key}": f"{value!r} is not an integer."}) from None
        if number < UNLIMITED:
            raise ValidationError({f"quota_set.{key}": f"{number} is less than the minimum of -1"})
        if key not in CORRAL_NAMES:
            raise ValidationError(
                {
                    f"quota_set.{key}": "Corral does not set this quota per project; only "
                    "instances, cores and ram."
                }
            )
        wanted[CORRAL_NAMES[key]] = number
    return wanted, force


def update_quota(user, body: dict) -> None:
    """Set ``user``'s own limits from a ``quota_set`` body (their own quota row; a group's or
    the default row may still grant more). As Nova, a limit below what they hold already is
    refused (400) unless the body forces it."""
    wanted, force = _wanted(body)
    if not wanted:
        return
    with transaction.atomic():
        quotas.lock_limits(user)  # the user's quota-counted requests wait for this
        if not force:
            used = quotas.usage(user)
            for name, limit in wanted.items():
                if limit != UNLIMITED and limit < getattr(used, name):
                    raise ParseError(
                        f"Quota limit {limit} for {NOVA_NAMES[name]} must be greater than or "
                        f"equal to already used and reserved {getattr(used, name)}."
                    )
        row, _ = Quota.objects.get_or_create(user=user)
        for name, limit in wanted.items():
            setattr(row, name, limit)
        row.save()


def reset_quota(user) -> None:
    """Unset ``user``'s own instances, cores and ram limits (the rows of their groups and the
    default apply again); their row goes when it sets nothing else."""
    with transaction.atomic():
        row = Quota.objects.select_for_update().filter(user=user).first()
        if row is None:
            return
        for name in NOVA_NAMES:
            setattr(row, name, None)
        if all(getattr(row, name) is None for name in LIMIT_NAMES):
            row.delete()
        else:
            row.save()


def absolute_limits(user, *, with_network: bool) -> dict:
    """Nova's absolute limits of ``user``: instances, cores and RAM from Corral's quotas
    (``absolute_figures``), key pairs per user, -1 for what Corral does not limit."""
    limits = {
        **absolute_figures(user),
        "maxTotalKeypairs": MAX_KEYS_PER_USER,
        "maxServerMeta": UNLIMITED,
        "maxImageMeta": UNLIMITED,
        "maxPersonality": UNLIMITED,
        "maxPersonalitySize": UNLIMITED,
        "maxServerGroups": UNLIMITED,
        "maxServerGroupMembers": UNLIMITED,
        "totalServerGroupsUsed": NovaServerGroup.objects.filter(user=user).count(),
    }
    if with_network:  # proxied to Neutron by Nova before 2.36; Corral has none of them
        limits |= {
            "maxSecurityGroups": UNLIMITED,
            "maxSecurityGroupRules": UNLIMITED,
            "maxTotalFloatingIps": UNLIMITED,
            "totalSecurityGroupsUsed": 0,
            "totalFloatingIpsUsed": 0,
        }
    return limits
