"""An instance's size, resource by resource, in the words refusals use ("8 vCPUs", "1024 MiB",
"10 GB of disk")."""

from __future__ import annotations

from django.template.defaultfilters import pluralize

# The resources of an instance's size, in the order a refusal names them.
RESOURCES = ("vcpus", "memory_mb", "disk_gb")


def quantity(resource: str, value: int) -> str:
    """``value`` of ``resource`` in words: "1 vCPU", "16 vCPUs", "2048 MiB", "10 GB of disk"."""
    if resource == "vcpus":
        return f"{value} vCPU{pluralize(value)}"
    if resource == "memory_mb":
        return f"{value} MiB"
    return f"{value} GB of disk"


def instance_count(count: int) -> str:
    """A number of instances in words: "1 instance", "5 instances"."""
    return f"{count} instance{pluralize(count)}"


def size_of(request: dict) -> dict[str, int]:
    """An instance reservation's size, resource by resource (0: not asked, as a disk may be)."""
    return {resource: request.get(resource) or 0 for resource in RESOURCES}


def slots_in(free: dict[str, int | None], size: dict[str, int]) -> int:
    """How many instances of ``size`` fit in ``free``; a resource not asked for, or that a host
    does not report (None: its free storage), limits nothing."""
    return min(
        free[resource] // size[resource]
        for resource in RESOURCES
        if size[resource] and free[resource] is not None
    )
