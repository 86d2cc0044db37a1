"""Rules the apps above hosts add to writing inventory objects through the API.

Registered from their ``AppConfig.ready()``; each rule takes the validated fields (a dict it
may complete) and raises a ValidationError or a ``project.errors.Refused`` naming the field at
fault:

- ``cluster_rules``: ``rule(attrs, cluster)`` on creating or changing a cluster (``cluster``
  None when creating): the scheduling app checks the policy's property values.
- ``launch_rules``: ``rule(attrs)`` on creating a VM, after the template's hardware filled in
  what was not given: the leases app checks a VM launched into a reservation and places it in
  the reserved hosts' cluster.
- ``operation_rules``: ``rule(vm, kind, requested_by)`` when someone asks for an operation on a
  VM (the API, the portal, the admin console: ``hosts.services.request_operation``), inside its
  transaction with the VM's row locked and read afresh, before the job is queued. A rule may
  refuse (raise ``project.errors.Refused``) or write to the VM: the pools app holds a pool VM
  started by someone other than its user for them (``admin_hold``). Jobs Corral queues itself
  (the prestart monitor, allocation, the balancer) do not pass here.
- ``host_rules``: ``rule(host)`` when a host is validated (``Host.clean()``: the API and the
  admin console), with the values about to be saved: the leases app refuses taking a host out
  of the free pool while VMs of leases run on it.
"""

from __future__ import annotations

from collections.abc import Callable

cluster_rules: list[Callable[[dict, object], None]] = []
launch_rules: list[Callable[[dict], None]] = []
operation_rules: list[Callable[[object, str, object], None]] = []
host_rules: list[Callable[[object], None]] = []


def add_cluster_rule(rule: Callable[[dict, object], None]) -> None:
    if rule not in cluster_rules:
        cluster_rules.append(rule)


def add_launch_rule(rule: Callable[[dict], None]) -> None:
    if rule not in launch_rules:
        launch_rules.append(rule)


def add_operation_rule(rule: Callable[[object, str, object], None]) -> None:
    if rule not in operation_rules:
        operation_rules.append(rule)


def add_host_rule(rule: Callable[[object], None]) -> None:
    if rule not in host_rules:
        host_rules.append(rule)
