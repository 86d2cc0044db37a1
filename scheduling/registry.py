"""Which policy units exist (built-in and user-written), and the built-in locked policies.

User-written units are Python classes (subclasses of ``PolicyUnitBase``) named by dotted path
in ``settings.CORRAL_SCHEDULING_UNITS``. One that cannot be imported, or that fails when
called, is reported on its PolicyUnit row and skipped; scheduling never crashes because of it.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from scheduling.models import FilterPosition, Policy, PolicyFilter, PolicyUnit, PolicyWeight
from scheduling.units.base import PolicyUnitBase
from scheduling.units.builtin import BUILTIN_UNITS

logger = logging.getLogger(__name__)

COMMON_FILTERS = [
    ("HostStatus", FilterPosition.FIRST),
    ("Memory", FilterPosition.NO_ORDER),
    ("CPU", FilterPosition.NO_ORDER),
    ("Storage", FilterPosition.NO_ORDER),
    ("PinToHost", FilterPosition.NO_ORDER),
    ("Network", FilterPosition.NO_ORDER),
    ("Migration", FilterPosition.NO_ORDER),
    ("Reservation", FilterPosition.NO_ORDER),
    ("VmAffinityGroups", FilterPosition.LAST),
]

BUILTIN_POLICIES = {
    "none": {
        "description": "Place each VM where the most memory is free; no load balancing.",
        "default": True,
        "filters": COMMON_FILTERS,
        "weights": [("VmAffinityGroups", 1), ("OptimalForEvenMemoryDistribution", 1)],
        "balance": "None",
        "properties": {},
    },
    "evenly_distributed": {
        "description": "Spread CPU load evenly; move VMs off hosts that stay over-utilized.",
        "filters": [*COMMON_FILTERS, ("CPUOverloaded", FilterPosition.NO_ORDER)],
        "weights": [
            ("VmAffinityGroups", 1),
            ("OptimalForEvenDistribution", 1),
            ("OptimalForEvenMemoryDistribution", 1),
        ],
        "balance": "OptimalForEvenDistributionBalance",
        "properties": {"HighUtilization": 80, "CpuOverCommitDurationMinutes": 2},
    },
    "power_saving": {
        "description": "Pack VMs onto few hosts so that others can be switched off.",
        "filters": [*COMMON_FILTERS, ("CPUOverloaded", FilterPosition.NO_ORDER)],
        "weights": [
            ("VmAffinityGroups", 1),
            ("OptimalForPowerSaving", 1),
            ("OptimalForPowerSavingMemory", 1),
        ],
        "balance": "OptimalForPowerSavingBalance",
        "properties": {
            "HighUtilization": 80,
            "LowUtilization": 20,
            "CpuOverCommitDurationMinutes": 2,
        },
    },
    "vm_evenly_distributed": {
        "description": "Spread the number of VMs evenly across hosts.",
        "filters": COMMON_FILTERS,
        "weights": [("VmAffinityGroups", 1), ("OptimalForEvenGuestDistribution", 1)],
        "balance": "OptimalForEvenGuestDistribution",
        "properties": {"HighVmCount": 10, "MigrationThreshold": 5, "SpmVmGrace": 5},
    },
}

_instances: dict[str, PolicyUnitBase] = {}


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _describe(cls: type[PolicyUnitBase], internal: bool) -> dict:
    kinds = cls.kinds()
    return {
        "description": cls.description,
        "implementation": _path(cls),
        "is_filter": "filter" in kinds,
        "is_weight": "weight" in kinds,
        "is_balance": "balance" in kinds,
        "internal": internal,
        "properties": {name: spec.as_json() for name, spec in cls.properties.items()},
        "error": "",
    }


def sync_units() -> None:
    """Make the PolicyUnit rows match the built-in classes and the configured user units."""
    for cls in BUILTIN_UNITS:
        PolicyUnit.objects.update_or_create(name=cls.name, defaults=_describe(cls, internal=True))
    for path in getattr(settings, "CORRAL_SCHEDULING_UNITS", []):
        try:
            cls = import_string(path)
            if not (isinstance(cls, type) and issubclass(cls, PolicyUnitBase)) or not cls.name:
                raise TypeError("not a PolicyUnitBase subclass with a name")
            if not cls.kinds():
                raise TypeError("implements none of filter, score, balance")
        except Exception as exc:
            logger.error("scheduling unit %s cannot be loaded: %s", path, exc)
            name = path.rsplit(".", 1)[-1][:64]
            PolicyUnit.objects.update_or_create(
                name=name,
                defaults={"implementation": path, "internal": False, "error": f"{exc}"},
            )
            continue
        PolicyUnit.objects.update_or_create(name=cls.name, defaults=_describe(cls, internal=False))


def load(unit: PolicyUnit) -> PolicyUnitBase:
    """The unit's implementation (cached); raises if it cannot be loaded."""
    if unit.error:
        raise RuntimeError(unit.error)
    instance = _instances.get(unit.implementation)
    if instance is None:
        instance = import_string(unit.implementation)()
        _instances[unit.implementation] = instance
    return instance


@transaction.atomic
def sync_builtin_policies() -> None:
    """Create or reset the locked built-in policies."""
    units = {unit.name: unit for unit in PolicyUnit.objects.all()}
    for name, spec in BUILTIN_POLICIES.items():
        policy, _ = Policy.objects.update_or_create(
            name=name,
            defaults={
                "description": spec["description"],
                "locked": True,
                "properties": spec["properties"],
                "balance": units[spec["balance"]],
            },
        )
        policy.filters.all().delete()
        PolicyFilter.objects.bulk_create(
            PolicyFilter(policy=policy, unit=units[unit], position=position)
            for unit, position in spec["filters"]
        )
        policy.weights.all().delete()
        PolicyWeight.objects.bulk_create(
            PolicyWeight(policy=policy, unit=units[unit], factor=factor)
            for unit, factor in spec["weights"]
        )
    if not Policy.objects.filter(is_default=True).exists():
        Policy.objects.filter(name="none").update(is_default=True)


def sync(sender=None, **kwargs) -> None:
    """post_migrate: units and built-in policies in step with the code."""
    sync_units()
    sync_builtin_policies()
