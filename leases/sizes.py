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
