"""The balancer loop: per cluster, the policy's balancer picks at most one VM to move.

The chosen VM becomes a migrate job whose candidates are the balancer's under-utilized hosts
plus the VM's own host, so the full scheduler may decide it should stay. Anti-bounce: the
balancers only offer destinations whose predicted load stays under the threshold, and a VM
migrated within ``CORRAL_BALANCE_COOLDOWN`` seconds is not moved again.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from hosts import jobs
from hosts.models import HOLDING_STATUSES, Cluster, Host, JobKind, VirtualMachine
from scheduling.scheduler import (
    build_context,
    effective_properties,
    policy_of,
    running_vms,
)
from scheduling.unit_calls import UnitCalls, UnitFailed
from scheduling.units.base import HostState

DEFAULT_HIGH_UTILIZATION = 80


def _track_overload(hosts, states, high: float) -> None:
    """Remember since when each host is over HighUtilization (the duration rule needs it)."""
    now = timezone.now()
    for host, state in zip(hosts, states, strict=True):
        over = state.cpu_load_percent > high
        if over and host.overloaded_since is None:
            Host.objects.filter(pk=host.pk, overloaded_since__isnull=True).update(
                overloaded_since=now
            )
            host.overloaded_since = state.overloaded_since = now
        elif not over and host.overloaded_since is not None:
            Host.objects.filter(pk=host.pk).update(overloaded_since=None)
            host.overloaded_since = state.overloaded_since = None


# Each cluster's HighUtilization as this process last read it: {cluster id: (value, when)}.
_thresholds: dict[int, tuple[float, float]] = {}


def forget_thresholds(sender=None, **kwargs) -> None:
    """A cluster, policy or unit changed in this process: read the thresholds again."""
    _thresholds.clear()


def high_utilization(cluster_id: int) -> float:
    """The cluster's HighUtilization, read at most once per sync interval in a process (a
    change made in another process counts from the next interval at the latest)."""
    known = _thresholds.get(cluster_id)
    if known is not None and time.time() - known[1] < settings.CORRAL_SYNC_INTERVAL:
        return known[0]
    cluster = Cluster.objects.select_related("policy__balance").get(pk=cluster_id)
    properties = effective_properties(policy_of(cluster), cluster)
    high = properties.get("HighUtilization") or DEFAULT_HIGH_UTILIZATION
    _thresholds[cluster_id] = (high, time.time())
    return high


def on_host_reported(sender, host: Host, committed_vcpus: int | None = None, **kwargs) -> None:
    """``hosts.signals.host_reported``: the duration rules count from when the host went over."""
    track_host_load(host, committed_vcpus)


def track_host_load(host: Host, committed_vcpus: int | None = None) -> None:
    """Start or stop one host's over-utilization clock from its load now.

    Run after each report of the host, so the duration rules (the CPUOverloaded filter, the
    balancers' "over for long enough") count from when the host went over, whatever the
    policy's balancer and however seldom it runs. The load is the scheduler's: measured CPU use
    where the host reports it, else the vCPUs its VMs hold (arriving ones included) per CPU
    (``committed_vcpus`` when the caller counted them).
    """
    if committed_vcpus is None:
        committed_vcpus = (
            VirtualMachine.objects.filter(
                Q(host_id=host.pk, status__in=HOLDING_STATUSES) | Q(migrating_to_id=host.pk)
            ).aggregate(vcpus=Sum("vcpus"))["vcpus"]
            or 0
        )
    state = HostState(
        id=host.pk,
        name=host.name,
        status=host.status,
        reservable=host.reservable,
        cpus=host.cpus or 0,
        vcpu_capacity=0,
        memory_capacity_mb=0,
        committed_memory_mb=0,
        committed_vcpus=committed_vcpus,
        vm_count=0,
        networks=set(),
        overloaded_since=host.overloaded_since,
        measured_cpu_percent=host.cpu_usage_percent,
    )
    _track_overload([host], [state], high_utilization(host.cluster_id))


def balance_cluster(cluster_id: int, *, dry_run: bool = False) -> dict:
    """Run the cluster's balancer once: what it chose and why, and the job if it queued one."""
    cluster = Cluster.objects.select_related("policy").get(pk=cluster_id)
    policy = policy_of(cluster)
    if policy.balance_id is None or policy.balance.name == "None":
        return {
            "cluster": cluster.name,
            "policy": policy.name,
            "action": "none",
            "reason": "the policy has no balancer",
        }
    if not policy.balance.enabled:
        return {
            "cluster": cluster.name,
            "policy": policy.name,
            "action": "none",
            "reason": f"its balancer {policy.balance.name} is disabled",
        }
    hosts = list(Host.objects.filter(cluster=cluster).order_by("pk"))
    properties = effective_properties(policy, cluster)
    ctx = build_context(cluster, None, "balance", hosts, properties)
    if not dry_run:
        _track_overload(
            hosts, ctx.hosts, properties.get("HighUtilization") or DEFAULT_HIGH_UTILIZATION
        )
    ctx.running_vms = running_vms(hosts)
    calls = UnitCalls(cluster_id=cluster.pk, subject=f"balancing cluster {cluster.name}")
    try:
        choice = calls.run(policy.balance, "balance", ctx.hosts, ctx)
    except UnitFailed as exc:
        return {
            "cluster": cluster.name,
            "policy": policy.name,
            "action": "none",
            "reason": f"balancer {policy.balance.name} failed: {exc}",
        }
    finally:
        calls.settle()
    loads = {s.name: round(s.cpu_load_percent, 1) for s in ctx.hosts}
    if choice is None:
        return {
            "cluster": cluster.name,
            "policy": policy.name,
            "action": "none",
            "reason": "no host needs relief",
            "loads": loads,
        }
    vm = VirtualMachine.objects.get(pk=choice.vm_id)
    names = dict(Host.objects.filter(pk__in=choice.candidate_host_ids).values_list("pk", "name"))
    answer = {
        "cluster": cluster.name,
        "policy": policy.name,
        "action": "migrate",
        "vm": vm.pk,
        "vm_name": vm.name,
        "from": next(s.name for s in ctx.hosts if s.id == choice.source_host_id),
        "candidates": [names[i] for i in choice.candidate_host_ids if i in names],
        "reason": choice.reason,
        "loads": loads,
    }
    if dry_run:
        return answer
    with transaction.atomic():
        job = jobs.submit(
            JobKind.MIGRATE,
            vm=vm,
            params={"candidates": choice.candidate_host_ids, "reason": "balance"},
        )
    answer["job"] = job.pk
    return answer
