"""What each host has given or promised to VMs, as the scheduler counts it, for host lists.

``with_usage()`` annotates any number of hosts in the list's one query (correlated
sub-selects); ``load()`` turns one annotated host into used and capacity figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import IntegerField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from hosts.capacity import schedulable
from hosts.models import HOLDING_STATUSES, Host, VirtualMachine
from project.db import count_of


def _sum_of(vms: QuerySet, field: str, host_field: str) -> Coalesce:
    total = (
        vms.filter(**{host_field: OuterRef("pk")})
        .order_by()
        .values(host_field)
        .annotate(n=Sum(field))
        .values("n")
    )
    return Coalesce(Subquery(total, output_field=IntegerField()), Value(0))


def with_usage(hosts: QuerySet) -> QuerySet:
    """Annotate ``committed_memory_mb``, ``committed_vcpus`` and ``running_vms``: the VMs
    holding the host (running, starting, stopping, unknown…) plus those migrating to it."""
    holding = VirtualMachine.objects.filter(status__in=HOLDING_STATUSES)
    arriving = VirtualMachine.objects.all()
    return hosts.annotate(
        committed_memory_mb=_sum_of(holding, "memory_mb", "host")
        + _sum_of(arriving, "memory_mb", "migrating_to"),
        committed_vcpus=_sum_of(holding, "vcpus", "host")
        + _sum_of(arriving, "vcpus", "migrating_to"),
        running_vms=count_of(holding, "host"),
    )


@dataclass
class Load:
    used: int
    capacity: int | None  # None until the host has reported its size
    unit: str
    size: int | None = None  # the host's own CPUs or MiB (capacity is this under overcommit)

    @property
    def percent(self) -> int | None:
        if not self.capacity:
            return None
        return round(100 * self.used / self.capacity)


def load(host: Host) -> tuple[Load, Load]:
    """Memory and vCPUs given to VMs on ``host`` (annotated by ``with_usage``) against what
    the scheduler may give: its size times the cluster's overcommit (``capacity``)."""
    capacity = schedulable(host.cluster, host.cpus, host.memory_mb)
    return (
        Load(
            getattr(host, "committed_memory_mb", 0) or 0, capacity.memory_mb, "MiB", host.memory_mb
        ),
        Load(getattr(host, "committed_vcpus", 0) or 0, capacity.vcpus, "vCPUs", host.cpus),
    )
