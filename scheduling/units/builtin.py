"""Corral's built-in policy units (after oVirt's): filters, weights and balancers."""

from __future__ import annotations

from datetime import timedelta

from hosts.models import HostStatus
from scheduling.units.base import (
    BalanceChoice,
    HostState,
    PolicyUnitBase,
    PropertySpec,
    SchedulingContext,
)

HIGH_UTILIZATION = PropertySpec(
    80, "CPU load (%) above which a host is over-utilized", minimum=50, maximum=99
)
LOW_UTILIZATION = PropertySpec(
    20, "CPU load (%) below which a host is under-utilized", minimum=0, maximum=49
)
DURATION = PropertySpec(
    2, "Minutes a host must stay over-utilized before it counts", minimum=1, maximum=1440
)
HIGH_VM_COUNT = PropertySpec(10, "VM count above which a host is over-utilized", minimum=0)
MIGRATION_THRESHOLD = PropertySpec(
    5, "Difference in VM count between hosts that starts a migration", minimum=2
)
SPM_VM_GRACE = PropertySpec(5, "VMs fewer on the storage manager host (kept for oVirt)", minimum=0)


def _over_for_long(host: HostState, ctx: SchedulingContext) -> bool:
    if host.cpu_load_percent <= ctx.properties["HighUtilization"]:
        return False
    if host.overloaded_since is None or ctx.now is None:
        return False
    return ctx.now - host.overloaded_since >= timedelta(
        minutes=ctx.properties["CpuOverCommitDurationMinutes"]
    )


# -- filters ------------------------------------------------------------------------------


class HostStatusFilter(PolicyUnitBase):
    name = "HostStatus"
    description = "Only hosts that are Up (not in maintenance, not unreachable)."

    def filter(self, hosts, ctx):
        return {h.id: f"host is {h.status}" for h in hosts if h.status != HostStatus.UP}


class MemoryFilter(PolicyUnitBase):
    name = "Memory"
    description = "Hosts with enough memory not yet given or promised (cluster overcommit)."

    def filter(self, hosts, ctx):
        return {
            h.id: f"{h.free_memory_mb} MiB free, {ctx.vm.memory_mb} MiB needed"
            for h in hosts
            if h.free_memory_mb < ctx.vm.memory_mb
        }


class CpuFilter(PolicyUnitBase):
    name = "CPU"
    description = "Hosts with enough CPUs for the VM and vCPUs left under the overcommit ratio."

    def filter(self, hosts, ctx):
        removed = {}
        for h in hosts:
            if ctx.vm.vcpus > h.cpus:
                removed[h.id] = f"{h.cpus} CPUs, the VM has {ctx.vm.vcpus} vCPUs"
            elif h.committed_vcpus + ctx.vm.vcpus > h.vcpu_capacity:
                removed[h.id] = f"{h.committed_vcpus} of {h.vcpu_capacity} vCPUs given"
        return removed


class StorageFilter(PolicyUnitBase):
    name = "Storage"
    description = "Hosts whose storage pool has room for the VM's whole disk."

    def filter(self, hosts, ctx):
        needed = ctx.vm.disk_gb * 1024**3
        return {
            h.id: f"{h.storage_free_bytes / 1024**3:.1f} GiB free in the storage pool, "
            f"{ctx.vm.disk_gb} GiB needed"
            for h in hosts
            if h.storage_free_bytes is not None and h.storage_free_bytes < needed
        }


class PinToHostFilter(PolicyUnitBase):
    name = "PinToHost"
    description = "A VM pinned to a host runs only there."

    def filter(self, hosts, ctx):
        pinned = ctx.vm.pinned_host_id
        if pinned is None:
            return {}
        return {h.id: "the VM is pinned to another host" for h in hosts if h.id != pinned}


class NetworkFilter(PolicyUnitBase):
    name = "Network"
    description = "Hosts that offer every network the VM needs."

    def filter(self, hosts, ctx):
        removed = {}
        for h in hosts:
            missing = sorted(ctx.vm.networks - h.networks)
            if missing:
                removed[h.id] = f"lacks network {', '.join(missing)}"
        return removed


class MigrationFilter(PolicyUnitBase):
    name = "Migration"
    description = "A migrating VM does not go to the host it runs on."

    def filter(self, hosts, ctx):
        if ctx.purpose != "migrate" or ctx.vm.current_host_id is None:
            return {}
        return {h.id: "the VM runs here already" for h in hosts if h.id == ctx.vm.current_host_id}


class CpuOverloadedFilter(PolicyUnitBase):
    name = "CPUOverloaded"
    description = "Hosts over HighUtilization for CpuOverCommitDurationMinutes take no more VMs."
    properties = {"HighUtilization": HIGH_UTILIZATION, "CpuOverCommitDurationMinutes": DURATION}

    def filter(self, hosts, ctx):
        return {
            h.id: f"CPU load {h.cpu_load_percent:.0f}% over {ctx.properties['HighUtilization']}%"
            for h in hosts
            if _over_for_long(h, ctx)
        }


class VmAffinityFilter(PolicyUnitBase):
    name = "VmAffinityGroups"
    description = "Enforcing affinity groups: VMs together or apart, on or off given hosts."

    def filter(self, hosts, ctx):
        removed = {}
        for group in ctx.affinity:
            for h in hosts:
                reason = _affinity_violation(group, h, enforcing_only=True)
                if reason:
                    removed.setdefault(h.id, reason)
        return removed

    def score(self, hosts, ctx):
        return {
            h.id: float(
                sum(1 for g in ctx.affinity if _affinity_violation(g, h, enforcing_only=False))
            )
            for h in hosts
        }


def _affinity_violation(group, host: HostState, *, enforcing_only: bool) -> str:
    if group.vm_rule != "disabled" and (group.vm_enforcing or not enforcing_only):
        if group.vm_rule == "positive" and group.member_hosts and host.id not in group.member_hosts:
            return f"affinity group {group.name}: its VMs run elsewhere"
        if group.vm_rule == "negative" and host.id in group.member_hosts:
            return f"affinity group {group.name}: another of its VMs runs here"
    if group.host_rule != "disabled" and (group.host_enforcing or not enforcing_only):
        if group.host_rule == "positive" and group.hosts and host.id not in group.hosts:
            return f"affinity group {group.name}: not one of its hosts"
        if group.host_rule == "negative" and host.id in group.hosts:
            return f"affinity group {group.name}: one of the hosts it avoids"
    return ""


class ReservationFilter(PolicyUnitBase):
    name = "Reservation"
    description = (
        "Reservable hosts run only VMs of an active reservation, and such VMs run only on the "
        "hosts allocated to their reservation."
    )

    def filter(self, hosts, ctx):
        if ctx.reservation_hosts is None:
            return {h.id: "reserved for leases" for h in hosts if h.reservable}
        return {
            h.id: "not allocated to the VM's reservation"
            for h in hosts
            if h.id not in ctx.reservation_hosts
        }


# -- weights --------------------------------------------------------------------------------


class EvenCpuDistribution(PolicyUnitBase):
    name = "OptimalForEvenDistribution"
    description = "Prefer the host with the lowest CPU load."

    def score(self, hosts, ctx):
        return {h.id: h.cpu_load_percent for h in hosts}


class EvenMemoryDistribution(PolicyUnitBase):
    name = "OptimalForEvenMemoryDistribution"
    description = "Prefer the host with the most free memory."

    def score(self, hosts, ctx):
        return {h.id: -float(h.free_memory_mb) for h in hosts}


class PowerSavingCpu(PolicyUnitBase):
    name = "OptimalForPowerSaving"
    description = "Prefer the busiest host still under HighUtilization, to empty others."
    properties = {"HighUtilization": HIGH_UTILIZATION}

    def score(self, hosts, ctx):
        high = ctx.properties["HighUtilization"]
        return {
            h.id: (1000.0 if h.cpu_load_percent >= high else -h.cpu_load_percent) for h in hosts
        }


class PowerSavingMemory(PolicyUnitBase):
    name = "OptimalForPowerSavingMemory"
    description = "Prefer the host with the least free memory that still fits the VM."

    def score(self, hosts, ctx):
        return {h.id: float(h.free_memory_mb) for h in hosts}


class EvenGuestDistribution(PolicyUnitBase):
    name = "OptimalForEvenGuestDistribution"
    description = "Prefer the host running the fewest VMs."
    properties = {
        "HighVmCount": HIGH_VM_COUNT,
        "MigrationThreshold": MIGRATION_THRESHOLD,
        "SpmVmGrace": SPM_VM_GRACE,
    }

    def score(self, hosts, ctx):
        return {h.id: float(h.vm_count) for h in hosts}

    def balance(self, hosts, ctx):
        up = [h for h in hosts if h.status == HostStatus.UP]
        if len(up) < 2:
            return None
        busiest = max(up, key=lambda h: (h.vm_count, -h.id))
        if busiest.vm_count <= ctx.properties["HighVmCount"]:
            return None
        threshold = ctx.properties["MigrationThreshold"]
        targets = [
            h for h in up if h.id != busiest.id and busiest.vm_count - h.vm_count >= threshold
        ]
        return _pick_vm(ctx, busiest, targets, f"{busiest.name} runs {busiest.vm_count} VMs")


# -- balancers ------------------------------------------------------------------------------


def _staying_under(choice, targets: list[HostState], ctx, high: float):
    """Anti-bounce: keep only the targets whose load stays under ``high`` once the VM arrives
    (no choice if none does)."""
    if choice is None:
        return None
    moved = next(v for v in ctx.running_vms if v.id == choice.vm_id)
    choice.candidate_host_ids = [
        t.id
        for t in targets
        if t.cpus and 100.0 * (t.committed_vcpus + moved.vcpus) / t.cpus < high
    ]
    return choice if choice.candidate_host_ids else None


def _pick_vm(ctx, source: HostState, targets: list[HostState], reason: str):
    if not targets:
        return None
    movable = [vm for vm in ctx.running_vms if vm.host_id == source.id and not vm.recently_migrated]
    if not movable:
        return None
    # The smallest VM that makes a difference: cheapest to move.
    vm = min(movable, key=lambda v: (v.memory_mb, v.vcpus, v.id))
    return BalanceChoice(
        vm_id=vm.id,
        source_host_id=source.id,
        candidate_host_ids=[t.id for t in targets],
        reason=reason,
    )


class NoneBalance(PolicyUnitBase):
    name = "None"
    description = "No load balancing."

    def balance(self, hosts, ctx):
        return None


class EvenDistributionBalance(PolicyUnitBase):
    name = "OptimalForEvenDistributionBalance"
    description = "Move a VM off a host over HighUtilization for the duration, to cooler hosts."
    properties = {"HighUtilization": HIGH_UTILIZATION, "CpuOverCommitDurationMinutes": DURATION}

    def balance(self, hosts, ctx):
        high = ctx.properties["HighUtilization"]
        hot = [h for h in hosts if h.status == HostStatus.UP and _over_for_long(h, ctx)]
        if not hot:
            return None
        source = max(hot, key=lambda h: (h.cpu_load_percent, -h.id))
        targets = [h for h in hosts if h.status == HostStatus.UP and h.cpu_load_percent < high]
        targets = [t for t in targets if t.id != source.id]
        choice = _pick_vm(
            ctx, source, targets, f"{source.name} CPU load {source.cpu_load_percent:.0f}%"
        )
        return _staying_under(choice, targets, ctx, high)


class PowerSavingBalance(PolicyUnitBase):
    name = "OptimalForPowerSavingBalance"
    description = (
        "Empty under-utilized hosts (below LowUtilization) onto hosts with room under "
        "HighUtilization; also relieve over-utilized hosts."
    )
    properties = {
        "HighUtilization": HIGH_UTILIZATION,
        "LowUtilization": LOW_UTILIZATION,
        "CpuOverCommitDurationMinutes": DURATION,
    }

    def balance(self, hosts, ctx):
        high, low = ctx.properties["HighUtilization"], ctx.properties["LowUtilization"]
        up = [h for h in hosts if h.status == HostStatus.UP]
        hot = [h for h in up if _over_for_long(h, ctx)]
        if hot:
            return EvenDistributionBalance().balance(hosts, ctx)
        cold = [h for h in up if 0 < h.cpu_load_percent < low and h.vm_count]
        if len(up) < 2 or not cold:
            return None
        source = min(cold, key=lambda h: (h.cpu_load_percent, h.id))
        targets = [h for h in up if h.id != source.id and low <= h.cpu_load_percent < high]
        choice = _pick_vm(ctx, source, targets, f"{source.name} is under-utilized; emptying it")
        return _staying_under(choice, targets, ctx, high)


BUILTIN_UNITS: list[type[PolicyUnitBase]] = [
    HostStatusFilter,
    MemoryFilter,
    CpuFilter,
    StorageFilter,
    PinToHostFilter,
    NetworkFilter,
    MigrationFilter,
    CpuOverloadedFilter,
    VmAffinityFilter,
    ReservationFilter,
    EvenCpuDistribution,
    EvenMemoryDistribution,
    PowerSavingCpu,
    PowerSavingMemory,
    EvenGuestDistribution,
    NoneBalance,
    EvenDistributionBalance,
    PowerSavingBalance,
]
