"""What a reservable host has room for over time, as lease planning sees it: what it gives
leases (its capacity under the cluster's overcommit, its free disk) and the slots in use on it,
with the peak of their use over any window. Read by the planner (``capacity.py``), the reasons
a lease does not fit (``shortfall.py``) and the capacity timeline (``capacity_timeline.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from hosts.models import Host
from leases.sizes import slots_in

GIB = 1024**3


@dataclass
class Slot:
    """Capacity in use on a host over [start, end): vCPUs, memory and disk, or the whole host."""

    start: datetime
    end: datetime
    vcpus: int
    memory_mb: int
    whole_host: bool
    disk_gb: int = 0


@dataclass
class HostRoom:
    """A reservable host as lease planning sees it: what it gives leases (``cpus`` and
    ``memory_mb`` under the cluster's overcommit) and the slots in use on it."""

    host: Host
    cpus: int
    memory_mb: int
    usage: list[Slot] = field(default_factory=list)
    # Free space in the host's storage pool (None: not reported, as on simulated hosts).
    disk_bytes: int | None = None

    def peak(self, start: datetime, end: datetime) -> tuple[int, int, bool]:
        """Most vCPUs and memory in use at any instant of [start, end), and whether the whole
        host is reserved at some instant of it.

        One sorted sweep over the instants where use changes (n log n in the host's
        allocations): where an allocation ends as another begins, the end is counted first,
        so back-to-back windows never add up.
        """
        changes = []
        for slot in self.usage:
            if slot.start < end and slot.end > start:
                changes.append((max(slot.start, start), 1, slot))
                changes.append((slot.end, 0, slot))
        changes.sort(key=lambda change: change[:2])
        cpu = memory = most_cpu = most_memory = 0
        whole = False
        for _, begins, slot in changes:
            sign = 1 if begins else -1
            cpu += sign * slot.vcpus
            memory += sign * slot.memory_mb
            most_cpu, most_memory = max(most_cpu, cpu), max(most_memory, memory)
            whole = whole or slot.whole_host
        return most_cpu, most_memory, whole

    def capacity(self) -> dict[str, int | None]:
        """All the host gives leases: vCPUs and memory (overcommitted), and its free disk (GB;
        None where the host reports no free storage)."""
        disk = None if self.disk_bytes is None else self.disk_bytes // GIB
        return {"vcpus": self.cpus, "memory_mb": self.memory_mb, "disk_gb": disk}

    def free(self, start, end) -> dict[str, int | None]:
        """What the host has free through all of [start, end): vCPUs, memory and disk (GB;
        None where the host reports no free storage), nothing while it is reserved whole."""
        used_cpu, used_mem, whole = self.peak(start, end)
        disk = None
        if self.disk_bytes is not None:
            disk = max(0, self.disk_bytes // GIB - self.reserved_disk_gb(start, end))
        if whole:
            return {"vcpus": 0, "memory_mb": 0, "disk_gb": None if disk is None else 0}
        return {
            "vcpus": max(0, self.cpus - used_cpu),
            "memory_mb": max(0, self.memory_mb - used_mem),
            "disk_gb": disk,
        }

    def free_slots(self, start, end, vcpus: int, memory_mb: int, disk_gb: int = 0) -> int:
        size = {"vcpus": vcpus, "memory_mb": memory_mb, "disk_gb": disk_gb}
        return slots_in(self.free(start, end), size)

    def reserved_disk_gb(self, start, end) -> int:
        """Disk reserved by allocations overlapping [start, end) (their sum: a disk, once
        made, stays until its VM is deleted)."""
        return sum(s.disk_gb for s in self.usage if s.start < end and s.end > start)

    def entirely_free(self, start, end) -> bool:
        return not any(s.start < end and s.end > start for s in self.usage)
