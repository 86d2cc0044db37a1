"""What a policy unit is, and what the scheduler hands it.

A unit implements any of ``filter`` (hard constraint: remove hosts, saying why), ``score``
(soft constraint: lower is better) and ``balance`` (pick one VM to move off an overloaded host,
and the hosts it may go to). Units read a snapshot of the cluster (``HostState``) built with a
constant number of queries; they never query per host, and never call libvirt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar


@dataclass(frozen=True)
class PropertySpec:
    """One property a unit takes: an integer range or a regular expression, and a default."""

    default: Any
    description: str = ""
    minimum: int | None = None
    maximum: int | None = None
    regex: str | None = None

    def validate(self, name: str, value: Any) -> Any:
        if self.regex is not None:
            if not isinstance(value, str) or not re.fullmatch(self.regex, value):
                raise ValueError(f"{name} must match {self.regex}.")
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            try:
                value = int(str(value))
            except ValueError:
                raise ValueError(f"{name} must be a whole number.") from None
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{name} must be at least {self.minimum}{self._range()}.")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{name} must be at most {self.maximum}{self._range()}.")
        return value

    def _range(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f" (allowed: {self.minimum} to {self.maximum})"
        return ""

    def as_json(self) -> dict:
        data = {"default": self.default, "description": self.description}
        for key in ("minimum", "maximum", "regex"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data


@dataclass
class HostState:
    """A host as scheduling sees it: capacity, what is given or promised, load, networks."""

    id: int
    name: str
    status: str
    reservable: bool
    cpus: int
    # What VMs may be given: CPUs and memory under the cluster's overcommit (hosts.capacity).
    vcpu_capacity: int
    memory_capacity_mb: int
    committed_memory_mb: int
    committed_vcpus: int
    vm_count: int
    networks: set[str]
    overloaded_since: datetime | None
    measured_cpu_percent: float | None = None
    # Free space in the host's storage pool; None: not reported (simulated hosts).
    storage_free_bytes: int | None = None

    @property
    def free_memory_mb(self) -> int:
        return self.memory_capacity_mb - self.committed_memory_mb

    @property
    def cpu_load_percent(self) -> float:
        """Measured CPU use where the host reports it, else vCPUs given per CPU."""
        if self.measured_cpu_percent is not None:
            return self.measured_cpu_percent
        if not self.cpus:
            return 0.0
        return 100.0 * self.committed_vcpus / self.cpus


@dataclass
class VmRequest:
    """The VM to place, as units see it."""

    id: int | None
    name: str
    vcpus: int
    memory_mb: int
    networks: set[str]
    current_host_id: int | None
    pinned_host_id: int | None
    disk_gb: int = 0


@dataclass
class AffinityState:
    """An affinity group the VM belongs to, with where its other members run."""

    name: str
    vm_rule: str
    vm_enforcing: bool
    host_rule: str
    host_enforcing: bool
    member_hosts: set[int]
    hosts: set[int]


@dataclass
class RunningVm:
    """A VM running in the cluster, for balancers."""

    id: int
    name: str
    host_id: int
    vcpus: int
    memory_mb: int
    recently_migrated: bool


@dataclass
class SchedulingContext:
    vm: VmRequest
    hosts: list[HostState]
    properties: dict[str, Any]
    purpose: str  # "start", "migrate" or "balance"
    affinity: list[AffinityState] = field(default_factory=list)
    reservation_hosts: set[int] | None = None
    now: datetime | None = None
    running_vms: list[RunningVm] = field(default_factory=list)


@dataclass
class BalanceChoice:
    """A balancer's answer: move this VM, to one of these hosts (the scheduler decides)."""

    vm_id: int
    source_host_id: int
    candidate_host_ids: list[int]
    reason: str


class PolicyUnitBase:
    """Subclass and implement one or more of filter/score/balance."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    properties: ClassVar[dict[str, PropertySpec]] = {}

    def filter(self, hosts: list[HostState], ctx: SchedulingContext) -> dict[int, str]:
        """Hosts to remove, as {host id: reason}."""
        raise NotImplementedError

    def score(self, hosts: list[HostState], ctx: SchedulingContext) -> dict[int, float]:
        """A cost per host: lower is better."""
        raise NotImplementedError

    def balance(self, hosts: list[HostState], ctx: SchedulingContext) -> BalanceChoice | None:
        raise NotImplementedError

    @classmethod
    def kinds(cls) -> set[str]:
        implemented = set()
        for kind, method in (("filter", "filter"), ("weight", "score"), ("balance", "balance")):
            if getattr(cls, method) is not getattr(PolicyUnitBase, method):
                implemented.add(kind)
        return implemented
