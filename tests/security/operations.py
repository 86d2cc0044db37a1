"""The API's operations as its served OpenAPI schema lists them, pointed at the objects of the
security tests' ``world``."""

from __future__ import annotations

import functools

from django.test import Client

from scheduling.models import PolicyUnit
from tests.security.conftest import World

METHODS = ("get", "post", "put", "patch", "delete")


@functools.cache
def served_schema() -> dict:
    """The schema as /api/schema/ serves it (it depends on the code only: read once)."""
    return Client().get("/api/schema/?format=json").json()


def schema_operations(schema: dict | None = None) -> list[tuple[str, str]]:
    """(method, path template) of every operation in the served OpenAPI schema."""
    schema = schema or served_schema()
    return [
        (method, path)
        for path, item in schema["paths"].items()
        for method in METHODS
        if method in item
    ]


def object_ids(world: World) -> dict[str, object]:
    """First path segment after /api/ -> the id of the world's object of that kind."""
    return {
        "affinitygroups": world.affinity_group.pk,
        "clusters": world.cluster.pk,
        "externaldomains": world.external_domain.pk,
        "groups": world.group.pk,
        "hosts": world.host.pk,
        "images": world.image.pk,
        "jobs": world.job.pk,
        "leases": world.lease.pk,
        "me": world.ssh_key.pk,  # /api/me/sshkeys/{id}/: another user's key
        "permissions": world.user_grant_id,
        "roles": world.role.pk,
        "schedulingpolicies": world.policy.pk,
        "schedulingpolicyunits": PolicyUnit.objects.order_by("pk").first().pk,
        "templates": world.template.pk,
        "users": world.other_user.pk,
        "vmpools": world.pool.pk,
        "vms": world.vm.pk,
    }


def part_ids(world: World) -> dict[str, object]:
    """The parts of a policy, under /api/schedulingpolicies/{policy_pk}/<part>/{id}/."""
    return {
        "filters": world.policy_filter.pk,
        "weights": world.policy_weight.pk,
        "balances": world.policy.balance_id,
    }


def concrete(path: str, world: World) -> str:
    segments = path.strip("/").split("/")
    if "{policy_pk}" in path:
        path = path.replace("{policy_pk}", str(world.policy.pk))
        return path.replace("{id}", str(part_ids(world).get(segments[3], "")))
    if "{id}" not in path:  # the API root, or a collection
        return path
    path = path.replace("{member_id}", str(world.image_member.pk))
    path = path.replace("{sid}", str(world.snapshot.pk))
    return path.replace("{id}", str(object_ids(world).get(segments[1], "")))
