"""The scheduler: a cluster's policy chooses the host for a VM, and says why.

``schedule()`` builds one snapshot of the cluster (hosts, what each has given or promised,
affinity, load) with a constant number of queries, runs the policy's filters in order, then
its weights. Weights are combined by **rank**, not by raw score: each weight orders the
remaining hosts (ties share a rank) and a host's total is the sum of factor x rank; the lowest
total wins, ties going to the lower host id. Raw scores live on unrelated scales (a CPU
percentage, MiB of memory, a VM count), so adding them would let one unit swamp the others —
the reason oVirt moved to rank-based selection. Factors still say which unit matters more.

Callers hold the cluster's scheduling lock (``hosts.host_choice.decision``) while they decide
and record the decision, so decisions in a cluster never race.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Sum
from django.utils import timezone

from hosts.capacity import schedulable
from hosts.host_choice import Decision, NoHostAvailable
from hosts.models import (
    HOLDING_STATUSES,
    Cluster,
    Host,
    Job,
    JobKind,
    JobState,
    VirtualMachine,
    VmStatus,
)
from scheduling import constraints
from scheduling.models import AffinityGroup, OnFailure, Policy
from scheduling.unit_calls import UnitCalls, UnitFailed
from scheduling.units.base import (
    AffinityState,
    HostState,
    RunningVm,
    SchedulingContext,
    VmRequest,
)
from scheduling.units.builtin import ReservationFilter

# Runs after every policy's own filters: reservable hosts take only their reservations' VMs.
ALWAYS_ENFORCED = ReservationFilter()

# VMs in these states hold their host's resources (pending ones included: Starting).
HOLDING = HOLDING_STATUSES


def policy_of(cluster: Cluster) -> Policy:
    if cluster.policy_id is not None:
        return cluster.policy
    policy = Policy.objects.filter(is_default=True).first()
    if policy is None:
        raise RuntimeError("No default scheduling policy exists; run manage.py migrate.")
    return policy


def _units_of(policy: Policy):
    filters = list(policy.filters.select_related("unit").order_by("position", "id"))
    weights = list(policy.weights.select_related("unit"))
    return filters, weights


def effective_properties(policy: Policy, cluster: Cluster | None, units=None) -> dict[str, Any]:
    """Unit defaults, then the policy's values, then the cluster's overrides."""
    if units is None:
        filters, weights = _units_of(policy)
        units = [f.unit for f in filters] + [w.unit for w in weights]
        if policy.balance_id:
            units.append(policy.balance)
    values: dict[str, Any] = {}
    for unit in units:
        for name, spec in unit.properties.items():
            values.setdefault(name, spec.get("default"))
    values.update(policy.properties or {})
    if cluster is not None:
        values.update(cluster.policy_properties or {})
    return values


# The host fields scheduling reads.
SNAPSHOT_FIELDS = (
    "id",
    "name",
    "status",
    "reservable",
    "cpus",
    "memory_mb",
    "networks",
    "reported_networks",
    "overloaded_since",
    "cpu_usage_percent",
    "storage_free_bytes",
)


def _host_rows(cluster: Cluster, hosts: list[Host] | None) -> list[dict]:
    """The given hosts' fields, or the cluster's host rows as plain values: making a model
    instance of each of a thousand hosts would cost more than the rest of the decision."""
    if hosts is None:
        return list(Host.objects.filter(cluster=cluster).order_by("pk").values(*SNAPSHOT_FIELDS))
    return [{name: getattr(host, name) for name in SNAPSHOT_FIELDS} for host in hosts]


def host_states(
    cluster: Cluster, hosts: list[Host] | None = None, exclude_vm: int | None = None
) -> list[HostState]:
    """What each host (the cluster's, unless given) has given or promised, in three queries
    whatever the number of hosts and VMs.

    The sums run over the cluster's VMs (a VM's host is always in its cluster), unordered, so
    the database neither joins nor sorts them nor parses a list of host ids.
    """
    rows = _host_rows(cluster, hosts)
    vms = VirtualMachine.objects.filter(cluster_id=cluster.pk).exclude(pk=exclude_vm).order_by()
    sums = {"memory": Sum("memory_mb"), "vcpus": Sum("vcpus"), "count": Count("id")}
    holding = vms.filter(host__isnull=False, status__in=HOLDING).values("host_id").annotate(**sums)
    arriving = vms.filter(migrating_to__isnull=False).values("migrating_to_id").annotate(**sums)
    used = {row["host_id"]: dict(row) for row in holding}
    for row in arriving:
        slot = used.setdefault(row["migrating_to_id"], {"memory": 0, "vcpus": 0, "count": 0})
        for key in ("memory", "vcpus", "count"):
            slot[key] += row[key]
    states = []
    for host in rows:
        slot = used.get(host["id"], {"memory": 0, "vcpus": 0, "count": 0})
        capacity = schedulable(cluster, host["cpus"] or 0, host["memory_mb"] or 0)
        states.append(
            HostState(
                id=host["id"],
                name=host["name"],
                status=host["status"],
                reservable=host["reservable"],
                cpus=host["cpus"] or 0,
                vcpu_capacity=capacity.vcpus,
                memory_capacity_mb=capacity.memory_mb,
                committed_memory_mb=slot["memory"] or 0,
                committed_vcpus=slot["vcpus"] or 0,
                vm_count=slot["count"] or 0,
                networks=set(host["reported_networks"] or []) | set(host["networks"] or []),
                overloaded_since=host["overloaded_since"],
                measured_cpu_percent=host["cpu_usage_percent"],
                storage_free_bytes=host["storage_free_bytes"],
            )
        )
    return states


def _affinity(vm: VirtualMachine | None, cluster: Cluster) -> list[AffinityState]:
    if vm is None or vm.pk is None:
        return []
    groups = list(
        AffinityGroup.objects.filter(cluster=cluster, vms=vm).prefetch_related("vms", "hosts")
    )
    states = []
    for group in groups:
        others = [
            other.host_id
            for other in group.vms.all()
            if other.pk != vm.pk and other.host_id and other.status in HOLDING
        ]
        states.append(
            AffinityState(
                name=group.name,
                vm_rule=group.vm_rule,
                vm_enforcing=group.vm_enforcing,
                host_rule=group.host_rule,
                host_enforcing=group.host_enforcing,
                member_hosts=set(others),
                hosts={h.pk for h in group.hosts.all()},
            )
        )
    return states


def build_context(
    cluster: Cluster,
    vm: VirtualMachine | None,
    purpose: str,
    hosts: list[Host] | None = None,
    properties: dict | None = None,
) -> SchedulingContext:
    if vm is not None:
        request = VmRequest(
            id=vm.pk,
            name=vm.name,
            vcpus=vm.vcpus,
            memory_mb=vm.memory_mb,
            networks=set(vm.template.networks or []),
            current_host_id=vm.host_id,
            pinned_host_id=vm.pinned_host_id,
            disk_gb=vm.disk_gb or 0,
        )
    else:
        request = VmRequest(None, "", 0, 0, set(), None, None)
    return SchedulingContext(
        vm=request,
        hosts=host_states(cluster, hosts, exclude_vm=vm.pk if vm is not None else None),
        properties=properties or {},
        purpose=purpose,
        affinity=_affinity(vm, cluster),
        reservation_hosts=_reservation_hosts(vm),
        now=timezone.now(),
    )


def _reservation_hosts(vm: VirtualMachine | None) -> set[int] | None:
    """The hosts capacity is held on for ``vm`` (a lease's reservation, say), from the
    providers registered in ``scheduling.constraints``; None when nothing holds it."""
    if vm is None:
        return None
    return constraints.reserved_hosts(vm)


def schedule(
    vm: VirtualMachine,
    cluster: Cluster | None = None,
    *,
    hosts: list[Host] | None = None,
    purpose: str = "start",
) -> Decision:
    """Hosts able to run ``vm``, best first, by its cluster's policy (NoHostAvailable if none).

    Disabled units are skipped (named in the explanation's ``disabled_units``). A unit that
    fails (``unit_calls``) is named in ``skipped_units`` with what its failure did: a filter
    keeps or drops every host as its ``on_failure`` says, a weight is left out.
    """
    cluster = cluster or vm.cluster
    policy = policy_of(cluster)
    filters, weights = _units_of(policy)
    properties = effective_properties(
        policy, cluster, [f.unit for f in filters] + [w.unit for w in weights]
    )
    ctx = build_context(cluster, vm, purpose, hosts, properties)
    calls = UnitCalls(cluster_id=cluster.pk, subject=f"placing VM {vm.name}")
    try:
        return _decide(vm, cluster, policy, filters, weights, ctx, calls, hosts)
    finally:
        calls.settle()


def _decide(vm, cluster, policy, filters, weights, ctx, calls, hosts) -> Decision:
    by_id = {state.id: state for state in ctx.hosts}
    remaining = list(ctx.hosts)
    skipped: list[dict] = []
    removed_by: list[dict] = []
    disabled = [part.unit.name for part in [*filters, *weights] if not part.unit.enabled]
    for policy_filter in filters:
        unit = policy_filter.unit
        if not unit.enabled:
            continue
        try:
            removed = calls.run(unit, "filter", remaining, ctx) or {}
        except UnitFailed as failed:
            drop = unit.on_failure == OnFailure.DROP
            skipped.append(
                {
                    "unit": unit.name,
                    "error": str(failed),
                    "outcome": "every host dropped" if drop else "every host kept",
                }
            )
            removed = {h.id: f"{unit.name} failed ({failed})" for h in remaining} if drop else {}
        if removed:
            removed_by.append(
                {
                    "unit": unit.name,
                    "removed": {by_id[h].name: why for h, why in removed.items() if h in by_id},
                }
            )
            remaining = [h for h in remaining if h.id not in removed]
    # Lease capacity holds whatever the policy says (a clone may drop or disable the unit).
    removed = ALWAYS_ENFORCED.filter(remaining, ctx)
    if removed:
        removed_by.append(
            {
                "unit": ALWAYS_ENFORCED.name,
                "removed": {by_id[h].name: why for h, why in removed.items()},
            }
        )
        remaining = [h for h in remaining if h.id not in removed]
    explanation: dict[str, Any] = {
        "policy": policy.name,
        "filters": removed_by,
        "skipped_units": skipped,
        "disabled_units": disabled,
    }
    if not remaining:
        reasons = "; ".join(
            f"{name}: {why} ({step['unit']})"
            for step in removed_by
            for name, why in step["removed"].items()
        )
        explanation["order"] = []
        raise NoHostAvailable(
            f"No host can run {vm.name} in cluster {cluster.name}: {reasons or 'it has no hosts'}.",
            explanation,
        )
    totals = {h.id: 0.0 for h in remaining}
    table: dict[str, dict] = {h.name: {"units": {}, "total": 0.0} for h in remaining}
    for weight in weights:
        if not weight.unit.enabled:
            continue
        try:
            scores = calls.run(weight.unit, "score", remaining, ctx)
        except UnitFailed as failed:
            skipped.append({"unit": weight.unit.name, "error": str(failed), "outcome": "neutral"})
            continue
        if not scores:
            continue
        rank_of = {
            score: rank
            for rank, score in enumerate(sorted({scores.get(h.id, 0.0) for h in remaining}))
        }
        name = weight.unit.name
        for h in remaining:
            score = scores.get(h.id, 0.0)
            rank = rank_of[score]
            totals[h.id] += weight.factor * rank
            table[h.name]["units"][name] = {
                "score": round(score, 3),
                "rank": rank,
                "factor": weight.factor,
            }
    for h in remaining:
        table[h.name]["total"] = totals[h.id]
    ordered = sorted(remaining, key=lambda h: (totals[h.id], h.id))
    explanation["scores"] = table
    explanation["order"] = [h.name for h in ordered]
    return Decision(
        host_ids=[h.id for h in ordered],
        explanation=explanation,
        loaded={h.pk: h for h in hosts or ()},
    )


def recently_migrated(vm_ids: list[int]) -> set[int]:
    since = timezone.now() - timedelta(seconds=settings.CORRAL_BALANCE_COOLDOWN)
    return set(
        Job.objects.filter(
            vm_id__in=vm_ids,
            kind=JobKind.MIGRATE,
            state=JobState.SUCCEEDED,
            finished_at__gte=since,
        ).values_list("vm_id", flat=True)
    )


def running_vms(hosts: list[Host]) -> list[RunningVm]:
    rows = list(
        VirtualMachine.objects.filter(host__in=hosts, status=VmStatus.UP).values_list(
            "pk", "name", "host_id", "vcpus", "memory_mb"
        )
    )
    recent = recently_migrated([row[0] for row in rows])
    pinned = set(
        VirtualMachine.objects.filter(
            pk__in=[row[0] for row in rows], pinned_host__isnull=False
        ).values_list("pk", flat=True)
    )
    return [
        RunningVm(
            id=pk,
            name=name,
            host_id=host,
            vcpus=vcpus,
            memory_mb=memory,
            recently_migrated=pk in recent or pk in pinned,
        )
        for pk, name, host, vcpus, memory in rows
    ]


def place(vm: VirtualMachine, *, purpose: str = "start", hosts: list[Host] | None = None):
    """The provider ``hosts.host_choice`` calls: ``schedule()`` by the VM's cluster's
    policy."""
    return schedule(vm, hosts=hosts, purpose=purpose)


__all__ = ["Decision", "NoHostAvailable", "effective_properties", "place", "policy_of", "schedule"]
