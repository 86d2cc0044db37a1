"""A host's 24-hour charts at 1,000 hosts: the points of 1,000 hosts over a day (1,440 each,
1.44 million rows) written in bulk, then one host's charts drawn (its page's fragment, as
the admin page and its minutely refresh render it), with the statements it takes; on
PostgreSQL, what a host's day of points costs on disk (table and indexes). The same for a VM
among 1,000 VMs (its portal and admin pages draw the same fragment)."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from bench.fleet import make_fleet
from hosts import charts, cluster_charts, cluster_samples, samples
from hosts.models import (
    Cluster,
    ClusterSample,
    Host,
    HostSample,
    Template,
    VirtualMachine,
    VmSample,
)

HOSTS = 1000
VMS = 1000
CLUSTER = "bench-charts"
BATCH = 20_000


def _write_days(minutes, owners, now, point) -> None:
    """A point a minute for the last day of each of ``owners`` (``point(owner, m, at)``, m
    minutes before ``now``'s), written ``BATCH`` at a time (1.44 million would not fit at
    once)."""
    start = samples.minute_of(now)
    batch = []
    for owner in owners:
        batch.extend(point(owner, m, start - timedelta(minutes=m)) for m in range(24 * 60))
        if len(batch) >= BATCH:
            minutes.objects.bulk_create(batch)
            batch = []
    minutes.objects.bulk_create(batch)


def _fill(now) -> list[Host]:
    cluster = Cluster.objects.create(name=CLUSTER)
    hosts = Host.objects.bulk_create(
        Host(
            name=f"chart-{n}",
            cluster=cluster,
            uri=f"qemu+ssh://root@chart-{n}.example.org/system",
            status="up",
            cpus=32,
            memory_mb=262_144,
        )
        for n in range(HOSTS)
    )
    _write_days(
        HostSample,
        hosts,
        now,
        lambda host, m, at: HostSample(
            host_id=host.pk,
            at=at,
            cpu_percent=(host.pk * 7 + m) % 100,
            memory_given_mb=65_536 + (m % 60) * 1024,
            memory_used_mb=32_768 + (m % 30) * 1024,
            vms_running=8 + m % 5,
        ),
    )
    return hosts


def _bytes_per_day(table_name: str, owners: int, owner: str) -> str:
    if connection.vendor != "postgresql":
        return "measured on PostgreSQL only"
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table_name}")
        cursor.execute(
            f"SELECT pg_total_relation_size('{table_name}'), pg_relation_size('{table_name}')"
        )
        total, table = cursor.fetchone()
    return (
        f"{total / owners / 1024:.0f} KiB a {owner} a day with its indexes "
        f"({table / owners / 1024:.0f} KiB of table; {total / (owners * 1440):.0f} B a point)"
    )


def host_day_chart(measure):
    now = timezone.now()
    try:
        hosts = _fill(now)
        host = Host.objects.get(pk=hosts[HOSTS // 2].pk)
        html = charts.last_day(host, now)
        assert html.count('<svg role="img"') == 3
        ms, queries = measure(lambda: charts.last_day(host, now))
        return [
            (
                f"24-hour charts of one host at {HOSTS:,} hosts × 1,440 points (median of 5)",
                f"{ms:.1f} ms, {queries} statement(s)",
                "≤ 100 ms",
                "yes" if ms <= 100 else "NO",
            ),
            (
                f"storage of a host's day of minute points ({HOSTS:,} hosts)",
                _bytes_per_day("hosts_hostsample", HOSTS, "host"),
                "",
                "",
            ),
        ]
    finally:
        HostSample.objects.filter(host__cluster__name=CLUSTER).delete()
        Host.objects.filter(cluster__name=CLUSTER).delete()
        Cluster.objects.filter(name=CLUSTER).delete()


FLEET_VMS = 20_000  # on 1,000 hosts (one per 20 VMs) in 10 clusters


def cluster_day_chart(measure):
    """The cluster census at 1,000 hosts and 20,000 VMs (what the loop does every minute), then
    the dashboard's charts: a day of the 10 clusters' points added up minute by minute."""
    now = timezone.now()
    try:
        clusters, _ = make_fleet(FLEET_VMS, clusters=10)
        Host.objects.update(status="up", cpus=32, memory_mb=262_144, cpu_usage_percent=35.0)
        every_third = list(VirtualMachine.objects.values_list("pk", flat=True))[::3]
        VirtualMachine.objects.filter(pk__in=every_third).update(status="up")
        census_ms, census_queries = measure(lambda: cluster_samples.census(now))
        start = samples.minute_of(now)
        ClusterSample.objects.bulk_create(
            (
                ClusterSample(
                    cluster=cluster,
                    at=start - timedelta(minutes=m),
                    cpu_percent=(cluster.pk * 7 + m) % 100,
                    memory_given_mb=1_000_000 + m * 100,
                    memory_capacity_mb=26_214_400,
                    vms_up=600 + m % 50,
                    vms_paused=m % 7,
                    vms_down=1_400 - m % 50,
                    vms_changing=m % 5,
                    vms_unknown=0,
                    pool_vms_free=40 + m % 10,
                    pool_vms_taken=100 + m % 30,
                )
                for cluster in clusters
                for m in range(1, 24 * 60)
            ),
            batch_size=BATCH,
        )
        ids = [c.pk for c in clusters]
        html = cluster_charts.last_day(ids, "Your clusters", now)
        assert html.count('<svg role="img"') == 3
        ms, queries = measure(lambda: cluster_charts.last_day(ids, "Your clusters", now))
        return [
            (
                f"cluster census: {HOSTS:,} hosts, {FLEET_VMS:,} VMs, 10 clusters (median of 5)",
                f"{census_ms:.1f} ms, {census_queries} statement(s)",
                "once a minute",
                "",
            ),
            (
                "dashboard's 24-hour charts, 10 clusters × 1,440 points added up (median of 5)",
                f"{ms:.1f} ms, {queries} statement(s)",
                "≤ 100 ms",
                "yes" if ms <= 100 else "NO",
            ),
        ]
    finally:
        ClusterSample.objects.all().delete()
        make_fleet(0, clusters=0)


def _fill_vms(now) -> list[VirtualMachine]:
    cluster = Cluster.objects.create(name=CLUSTER)
    template = Template.objects.create(name=CLUSTER, memory_mb=4096, vcpus=2, disk_gb=20)
    vms = VirtualMachine.objects.bulk_create(
        VirtualMachine(
            name=f"chart-vm-{n}",
            cluster=cluster,
            template=template,
            status="up",
            vcpus=2,
            memory_mb=4096,
            disk_gb=20,
        )
        for n in range(VMS)
    )
    _write_days(
        VmSample,
        vms,
        now,
        lambda vm, m, at: VmSample(
            vm_id=vm.pk,
            at=at,
            cpu_percent=(vm.pk * 7 + m) % 100,
            memory_used_mb=1024 + (m % 60) * 32,
            disk_read_bps=(m % 30) * 100_000,
            disk_write_bps=(m % 20) * 50_000,
            net_rx_bps=(m % 15) * 20_000,
            net_tx_bps=(m % 10) * 10_000,
        ),
    )
    return vms


def vm_day_chart(measure):
    now = timezone.now()
    try:
        vms = _fill_vms(now)
        vm = VirtualMachine.objects.get(pk=vms[VMS // 2].pk)
        html = charts.vm_last_day(vm, now)
        assert html.count('<svg role="img"') == 4
        ms, queries = measure(lambda: charts.vm_last_day(vm, now))
        return [
            (
                f"24-hour charts of one VM at {VMS:,} VMs × 1,440 points (median of 5)",
                f"{ms:.1f} ms, {queries} statement(s)",
                "≤ 100 ms",
                "yes" if ms <= 100 else "NO",
            ),
            (
                f"storage of a VM's day of minute points ({VMS:,} VMs)",
                _bytes_per_day("hosts_vmsample", VMS, "VM"),
                "",
                "",
            ),
        ]
    finally:
        VmSample.objects.filter(vm__cluster__name=CLUSTER).delete()
        VirtualMachine.objects.filter(cluster__name=CLUSTER).delete()
        Template.objects.filter(name=CLUSTER).delete()
        Cluster.objects.filter(name=CLUSTER).delete()
