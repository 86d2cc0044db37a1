"""Scheduling benchmarks: one placement decision on a large cluster, and one balancer cycle.

Each scenario builds its own cluster (names and URIs of its own, nothing deleted), so the
rows other scenarios left behind do not matter: scheduling reads one cluster at a time.
"""

from datetime import timedelta
from itertools import count

from django.db import connection
from django.utils import timezone

from hosts import host_choice
from hosts.models import Cluster, Host, Template, VirtualMachine
from scheduling.balancer import balance_cluster
from scheduling.models import Policy

_serial = count(1)


def _cluster(hosts: int, vms: int, policy: str | None = None) -> tuple[Cluster, list[Host]]:
    """A cluster of Up hosts (64 CPUs, 64 GiB) with ``vms`` small VMs up, spread unevenly (so
    the weights see many different scores)."""
    tag = f"sched{next(_serial)}"
    cluster = Cluster.objects.create(
        name=tag, policy=Policy.objects.get(name=policy) if policy else None
    )
    template = Template.objects.create(name=tag, vcpus=1, memory_mb=256, disk_gb=1)
    made = Host.objects.bulk_create(
        Host(
            name=f"{tag}-h{i}",
            cluster=cluster,
            uri=f"qemu+ssh://root@{tag}-h{i}/system",
            status="up",
            cpus=64,
            memory_mb=64 * 1024,
            reported_networks=["default"],
        )
        for i in range(hosts)
    )
    VirtualMachine.objects.bulk_create(
        (
            VirtualMachine(
                name=f"{tag}-vm{i}",
                cluster=cluster,
                template=template,
                host=made[(i * i) % hosts],
                status="up",
                vcpus=1,
                memory_mb=256,
                disk_gb=1,
            )
            for i in range(vms)
        ),
        batch_size=2000,
    )
    _analyze()
    return cluster, made


def _analyze() -> None:
    """Give PostgreSQL's planner the statistics its autovacuum would have gathered by now on a
    live database (SQLite keeps none unless asked, and a live one is not asked)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE hosts_virtualmachine, hosts_host")


def placement_decision(measure):
    """Choosing a host for a VM being started: the lock, the snapshot, filters and weights."""
    rows, queries = [], {}
    for hosts, vms in ((100, 2_000), (1_000, 20_000)):
        cluster, _ = _cluster(hosts, vms)
        template = Template.objects.get(name=cluster.name)
        vm = VirtualMachine.objects.create(
            name=f"{cluster.name}-new",
            cluster=cluster,
            template=template,
            vcpus=1,
            memory_mb=256,
            disk_gb=1,
        )

        def decide(vm_id=vm.pk, cluster_id=cluster.pk):
            starting = VirtualMachine.objects.get(pk=vm_id)
            with host_choice.decision(cluster_id):
                return host_choice.place(starting)

        ms, queries[hosts] = measure(decide)
        chosen = decide().host.name
        rows.append(
            (
                f"placement, default policy ({hosts:,} hosts, {vms:,} VMs)",
                f"{ms:.1f} ms, {queries[hosts]} queries (chose {chosen})",
                "<= 50 ms" if hosts == 1_000 else "",
                ("yes" if ms <= 50 else "NO") if hosts == 1_000 else "",
            )
        )
    rows.append(
        (
            "placement queries at 100 / 1,000 hosts",
            f"{queries[100]} / {queries[1_000]}",
            "the same",
            "yes" if queries[100] == queries[1_000] else "NO",
        )
    )
    return rows


def balancer_cycle(measure):
    """One evenly_distributed balancer run over a large cluster with one host to relieve."""
    cluster, hosts = _cluster(500, 10_000, policy="evenly_distributed")
    Host.objects.filter(pk=hosts[0].pk).update(
        cpu_usage_percent=95.0, overloaded_since=timezone.now() - timedelta(minutes=10)
    )
    outcome = {}

    def cycle():
        outcome.update(balance_cluster(cluster.pk))

    ms, queries = measure(cycle, repeat=3)
    moved = f"{outcome.get('action')} {outcome.get('vm_name', '')}".strip()
    return [
        (
            "balancer cycle, evenly_distributed (500 hosts, 10,000 VMs)",
            f"{ms:.0f} ms, {queries} queries ({moved})",
            "<= 2000 ms",
            "yes" if ms <= 2000 else "NO",
        )
    ]
