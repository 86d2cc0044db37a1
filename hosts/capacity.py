"""What a host may give VMs: its CPUs and memory under its cluster's overcommit.

The one computation of it: the scheduler places VMs against it, lease planning reserves it,
and the admin console and Corral's API show it beside the host's own size. Nova's hypervisors
and Blazar's hosts show the host's own size (``cpus``, ``memory_mb``), as Nova reports a
compute node's, never this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hosts.models import Cluster


@dataclass(frozen=True)
class Capacity:
    """vCPUs and MiB a host may give VMs; None where the host has not reported its size."""

    vcpus: int | None
    memory_mb: int | None


def schedulable(cluster: Cluster, cpus: int | None, memory_mb: int | None) -> Capacity:
    """A host of ``cpus`` CPUs and ``memory_mb`` MiB in ``cluster``: its CPUs times the
    cluster's CPU overcommit ratio and its memory times the memory overcommit, rounded down."""
    vcpus = None
    if cpus is not None:
        # Rounded first: 25 CPUs x 4.6 is 114.99999999999999 in floating point, yet 115 vCPUs.
        vcpus = math.floor(round(cpus * cluster.cpu_overcommit_ratio, 6))
    memory = None if memory_mb is None else memory_mb * cluster.memory_overcommit_percent // 100
    return Capacity(vcpus=vcpus, memory_mb=memory)
