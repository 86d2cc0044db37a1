"""Use cases that change scheduling policies: create, clone, edit, and their property values."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from hosts.models import Cluster
from project.access.permissions import holds
from scheduling.models import Policy, PolicyFilter, PolicyUnit, PolicyWeight
from scheduling.units.base import PropertySpec


def policy_units(policy: Policy, extra: list[PolicyUnit] = ()) -> list[PolicyUnit]:
    units = [f.unit for f in policy.filters.select_related("unit")]
    units += [w.unit for w in policy.weights.select_related("unit")]
    if policy.balance_id:
        units.append(policy.balance)
    return [*units, *extra]


def validate_properties(units: list[PolicyUnit], values: dict) -> dict:
    """Check property values against the rules of the units that take them."""
    if not isinstance(values, dict):
        raise ValidationError("Properties are an object of name: value.")
    specs: dict[str, PropertySpec] = {}
    for unit in units:
        for name, rule in unit.properties.items():
            specs[name] = PropertySpec(
                default=rule.get("default"),
                minimum=rule.get("minimum"),
                maximum=rule.get("maximum"),
                regex=rule.get("regex"),
            )
    cleaned, problems = {}, []
    for name, value in values.items():
        spec = specs.get(name)
        if spec is None:
            known = ", ".join(sorted(specs)) or "none"
            problems.append(f"Unknown property {name!r}; this policy's units take: {known}.")
            continue
        try:
            cleaned[name] = spec.validate(name, value)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValidationError(problems)
    return cleaned


def may_change(user, policy: Policy) -> bool:
    """PolicyAdmin on every cluster that uses the policy (or somewhere, if none does)."""
    clusters = list(Cluster.objects.filter(policy=policy))
    if not clusters:
        return holds(user, "scheduling.change_policy")
    return all(holds(user, "scheduling.change_policy", cluster) for cluster in clusters)


def check_may_change(user, policy: Policy) -> None:
    if policy.locked:
        raise PermissionDenied(
            f"Policy {policy.name} is built in and locked; clone it to change it."
        )
    if not may_change(user, policy):
        raise PermissionDenied(
            f"Changing {policy.name} needs PolicyAdmin on every cluster that uses it."
        )


@transaction.atomic
def clone(policy: Policy, name: str, description: str | None = None) -> Policy:
    """A new, unlocked copy of ``policy`` (its units, positions, factors and properties)."""
    copy = Policy(
        name=name,
        description=policy.description if description is None else description,
        properties=dict(policy.properties),
        balance=policy.balance,
    )
    copy.full_clean()
    copy.save()
    PolicyFilter.objects.bulk_create(
        PolicyFilter(policy=copy, unit=f.unit, position=f.position) for f in policy.filters.all()
    )
    PolicyWeight.objects.bulk_create(
        PolicyWeight(policy=copy, unit=w.unit, factor=w.factor) for w in policy.weights.all()
    )
    return copy


@transaction.atomic
def make_default(policy: Policy) -> None:
    Policy.objects.filter(is_default=True).exclude(pk=policy.pk).update(is_default=False)
    Policy.objects.filter(pk=policy.pk).update(is_default=True)


def check_cluster_policy(attrs: dict, cluster) -> None:
    """A cluster's policy property values, checked against its policy's units (a rule
    registered in ``hosts.checks``)."""
    if "policy" not in attrs and "policy_properties" not in attrs:
        return
    policy = attrs.get("policy", getattr(cluster, "policy", None))
    policy = policy or Policy.objects.filter(is_default=True).first()
    values = attrs.get("policy_properties", getattr(cluster, "policy_properties", {}))
    try:
        attrs["policy_properties"] = validate_properties(policy_units(policy), values or {})
    except ValidationError as exc:
        raise ValidationError({"policy_properties": exc.messages}) from exc
