"""Fixtures for the scheduling tests: clusters of Up hosts made as rows, policies, placed VMs.

Most scheduling needs no libvirt: hosts are rows with the capacity a sync would have read
(16 CPUs, 3072 MiB, network "default"), and VMs are rows with a status and a host.
"""

from __future__ import annotations

import threading

import pytest

from hosts import driver, sync
from hosts.models import Cluster, Host, VirtualMachine
from scheduling import registry, unit_calls
from scheduling.models import FilterPosition, Policy, PolicyFilter, PolicyUnit, PolicyWeight
from tests.conftest import unique, wait_until
from tests.scheduling import user_units as site_units

POSITIONS = {
    "first": FilterPosition.FIRST,
    "no_order": FilterPosition.NO_ORDER,
    "last": FilterPosition.LAST,
}


@pytest.fixture
def add_hosts(db):
    """add_hosts(cluster, count=2, **fields) -> Up hosts h1..hN of 16 CPUs and 3072 MiB."""

    def add(cluster: Cluster, count: int = 2, **fields) -> list[Host]:
        values = {
            "status": "up",
            "cpus": 16,
            "memory_mb": 3072,
            "reported_networks": ["default"],
            **fields,
        }
        existing = Host.objects.filter(cluster=cluster).count()
        return [
            Host.objects.create(
                cluster=cluster,
                name=f"h{existing + i}",
                uri=f"qemu+ssh://root@{unique('node')}.example.org/system",
                **values,
            )
            for i in range(1, count + 1)
        ]

    return add


@pytest.fixture
def small_template(make_template):
    """1 vCPU and 128 MiB, no networks."""
    return make_template(vcpus=1, memory_mb=128, disk_gb=1)


@pytest.fixture
def vm_in(make_vm, small_template):
    """vm_in(cluster, **fields) -> a VM (Down, nowhere, unless told) made from a small template."""

    def make(cluster: Cluster, **fields) -> VirtualMachine:
        template = fields.pop("template", small_template)
        return make_vm(cluster=cluster, template=template, **fields)

    return make


@pytest.fixture
def vm_on(vm_in):
    """vm_on(host, status="up", **fields) -> a VM holding resources on ``host``."""

    def make(host: Host, status: str = "up", **fields) -> VirtualMachine:
        return vm_in(host.cluster, host=host, status=status, **fields)

    return make


@pytest.fixture
def make_policy(db):
    """make_policy(filters=[...], weights=[...], balance=None, properties={}) -> an unlocked
    policy. Filters are unit names or (name, "first"|"no_order"|"last"); weights are unit
    names or (name, factor)."""

    def make(
        filters=(),
        weights=(),
        balance: str | None = None,
        properties: dict | None = None,
        name: str | None = None,
    ) -> Policy:
        policy = Policy.objects.create(
            name=name or unique("policy"),
            properties=properties or {},
            balance=PolicyUnit.objects.get(name=balance) if balance else None,
        )
        for item in filters:
            unit, position = (item, "no_order") if isinstance(item, str) else item
            PolicyFilter.objects.create(
                policy=policy, unit=PolicyUnit.objects.get(name=unit), position=POSITIONS[position]
            )
        for item in weights:
            unit, factor = (item, 1) if isinstance(item, str) else item
            PolicyWeight.objects.create(
                policy=policy, unit=PolicyUnit.objects.get(name=unit), factor=factor
            )
        return policy

    return make


@pytest.fixture
def cluster_with(make_cluster, add_hosts, make_policy):
    """cluster_with(hosts=2, policy=None, **cluster_fields) -> (cluster, hosts).

    ``policy`` is a Policy, the name of a built-in one, or None for the default policy.
    """

    def make(hosts: int = 2, policy=None, **fields) -> tuple[Cluster, list[Host]]:
        if isinstance(policy, str):
            policy = Policy.objects.get(name=policy)
        cluster = make_cluster(policy=policy, **fields)
        return cluster, add_hosts(cluster, hosts)

    return make


@pytest.fixture
def sim_cluster(transactional_db, sim_daemons, make_cluster):
    """sim_cluster(count=3, policy=None) -> (cluster, hosts) of the simulated hosts, synced.

    Domains of every VM in the database are removed from the daemons afterwards.
    """

    def make(count: int = 3, policy=None) -> tuple[Cluster, list[Host]]:
        if isinstance(policy, str):
            policy = Policy.objects.get(name=policy)
        cluster = make_cluster(policy=policy)
        hosts = []
        for daemon in sim_daemons[:count]:
            host = Host.objects.create(name=daemon.name, cluster=cluster, uri=daemon.uri)
            sync.sync_host(host.pk)
            host.refresh_from_db()
            hosts.append(host)
        return cluster, hosts

    yield make
    wanted = {str(uuid) for uuid in VirtualMachine.objects.values_list("uuid", flat=True)}
    for daemon in sim_daemons:
        for domain in driver.host_report(daemon.uri).domains:
            if domain.uuid in wanted:
                driver.undefine(daemon.uri, domain.uuid)


@pytest.fixture
def site_unit(db, settings):
    """site_unit("HangingFilter", ...) -> the PolicyUnit rows of these user-written units of
    tests/scheduling/user_units.py, registered as a site registers them. Units that hang are
    released at the end of the test, and their threads waited for."""
    site_units.HANGS = threading.Event()
    site_units.FLAKY["failing"] = True

    def register(*names: str) -> list[PolicyUnit]:
        settings.CORRAL_SCHEDULING_UNITS = [f"tests.scheduling.user_units.{n}" for n in names]
        registry.sync_units()
        return [PolicyUnit.objects.get(name=name) for name in names]

    yield register
    site_units.HANGS.set()
    wait_until(lambda: not unit_calls.hung_units(), timeout=10, message="a unit still hangs")
