"""A host's 24-hour charts at 1,000 hosts: the points of 1,000 hosts over a day (1,440 each,
1.44 million rows) written in bulk, then one host's charts drawn (its page's fragment, as
the admin page and its minutely refresh render it), with the statements it takes; on
PostgreSQL, what a host's day of points costs on disk (table and indexes). The same for a VM
among 1,000 VMs (its portal and admin pages draw the same fragment), and for the dashboard's
clusters. The ``*_month_chart`` scenarios add the 29 days of hourly points before the day the
pruning leaves (about 695 an owner) and draw the last week's and the last month's charts."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from bench.fleet import make_fleet
from hosts import charts, cluster_charts, cluster_samples, samples
from hosts.models import (
    Cluster,
    ClusterHourSample,
    ClusterSample,
    Host,
    HostHourSample,
    HostSample,
    Template,
    VirtualMachine,
    VmHourSample,
    VmSample,
)
from hosts.spans import DAY, MONTH, WEEK

HOSTS = 1000
VMS = 1000
CLUSTER = "bench-charts"
BATCH = 20_000


def _minutes(now) -> list:
    """The last day's minutes, from ``now``'s back."""
    return [samples.minute_of(now) - timedelta(minutes=m) for m in range(24 * 60)]


def _hours(now) -> list:
    """The hours the pruning keeps before the minutes of the last day: back from the hour
    before the one its oldest minute falls in, to thirty days before ``now``."""
    first = _minutes(now)[-1].replace(minute=0)
    hours = (first - timedelta(hours=h) for h in range(1, 30 * 24))
    return [at for at in hours if at > now - samples.HOURS_KEPT]


def _write(model, owners, times, point) -> None:
    """A point of each of ``owners`` at each of ``times`` (``point(owner, n, at)``, n the
    time's place), written ``BATCH`` at a time (1.44 million would not fit at once)."""
    batch = []
    for owner in owners:
        batch.extend(point(owner, n, at) for n, at in enumerate(times))
        if len(batch) >= BATCH:
            model.objects.bulk_create(batch)
            batch = []
    model.objects.bulk_create(batch)


def _spans(what: str, points: str, draw, charts_drawn: int, measure) -> list[tuple]:
    """The last week's and the last month's charts drawn by ``draw(span)``, timed."""
    rows = []
    for span in (WEEK, MONTH):
        assert draw(span).count('<svg role="img"') == charts_drawn
        ms, queries = measure(lambda span=span: draw(span))
        rows.append(
            (
                f"{span.label} charts of {what} at {points} (median of 5)",
                f"{ms:.1f} ms, {queries} statement(s)",
                "≤ 100 ms",
                "yes" if ms <= 100 else "NO",
            )
        )
    return rows


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
    _write(
        HostSample,
        hosts,
        _minutes(now),
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
        html = charts.host_span(host, DAY, now)
        assert html.count('<svg role="img"') == 3
        ms, queries = measure(lambda: charts.host_span(host, DAY, now))
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
        html = cluster_charts.clusters_span(ids, "Your clusters", DAY, now)
        assert html.count('<svg role="img"') == 3
        ms, queries = measure(lambda: cluster_charts.clusters_span(ids, "Your clusters", DAY, now))
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
    _write(
        VmSample,
        vms,
        _minutes(now),
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
        html = charts.vm_span(vm, DAY, now)
        assert html.count('<svg role="img"') == 4
        ms, queries = measure(lambda: charts.vm_span(vm, DAY, now))
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


def _month_points(now) -> str:
    return f"1,440 minute + {len(_hours(now))} hourly points each"


def host_month_chart(measure):
    """One host's last week and last month among 1,000 hosts' days of minutes and 29 days of
    hours (0.7 million ``HostHourSample`` rows)."""
    now = timezone.now()
    try:
        hosts = _fill(now)
        _write(
            HostHourSample,
            hosts,
            _hours(now),
            lambda host, h, at: HostHourSample(
                host_id=host.pk,
                at=at,
                cpu_percent=(host.pk * 7 + h) % 100,
                memory_given_mb=65_536 + (h % 24) * 1024,
                memory_used_mb=32_768 + (h % 12) * 1024,
                vms_running=8 + h % 5,
            ),
        )
        host = Host.objects.get(pk=hosts[HOSTS // 2].pk)
        return _spans(
            "one host",
            f"{HOSTS:,} hosts × {_month_points(now)}",
            lambda span: charts.host_span(host, span, now),
            3,
            measure,
        )
    finally:
        HostHourSample.objects.filter(host__cluster__name=CLUSTER).delete()
        HostSample.objects.filter(host__cluster__name=CLUSTER).delete()
        Host.objects.filter(cluster__name=CLUSTER).delete()
        Cluster.objects.filter(name=CLUSTER).delete()


def _cluster_point(model, cluster, n: int, at):
    return model(
        cluster=cluster,
        at=at,
        cpu_percent=(cluster.pk * 7 + n) % 100,
        memory_given_mb=1_000_000 + n * 100,
        memory_capacity_mb=26_214_400,
        vms_up=600 + n % 50,
        vms_paused=n % 7,
        vms_down=1_400 - n % 50,
        vms_changing=n % 5,
        vms_unknown=0,
        pool_vms_free=40 + n % 10,
        pool_vms_taken=100 + n % 30,
    )


def cluster_month_chart(measure):
    """The dashboard's last week and last month: 10 clusters' days of minutes and 29 days of
    hours, added up."""
    now = timezone.now()
    try:
        clusters = Cluster.objects.bulk_create(Cluster(name=f"{CLUSTER}-{n}") for n in range(10))
        _write(
            ClusterSample,
            clusters,
            _minutes(now),
            lambda c, m, at: _cluster_point(ClusterSample, c, m, at),
        )
        _write(
            ClusterHourSample,
            clusters,
            _hours(now),
            lambda c, h, at: _cluster_point(ClusterHourSample, c, h, at),
        )
        ids = [c.pk for c in clusters]
        return _spans(
            "the dashboard",
            f"10 clusters × {_month_points(now)}, added up",
            lambda span: cluster_charts.clusters_span(ids, "Your clusters", span, now),
            3,
            measure,
        )
    finally:
        Cluster.objects.filter(name__startswith=f"{CLUSTER}-").delete()


def vm_month_chart(measure):
    """One VM's last week and last month among 1,000 VMs' days of minutes and 29 days of
    hours (0.7 million ``VmHourSample`` rows)."""
    now = timezone.now()
    try:
        vms = _fill_vms(now)
        _write(
            VmHourSample,
            vms,
            _hours(now),
            lambda vm, h, at: VmHourSample(
                vm_id=vm.pk,
                at=at,
                cpu_percent=(vm.pk * 7 + h) % 100,
                memory_used_mb=1024 + (h % 24) * 32,
                disk_read_bps=(h % 30) * 100_000,
                disk_write_bps=(h % 20) * 50_000,
                net_rx_bps=(h % 15) * 20_000,
                net_tx_bps=(h % 10) * 10_000,
            ),
        )
        vm = VirtualMachine.objects.get(pk=vms[VMS // 2].pk)
        return _spans(
            "one VM",
            f"{VMS:,} VMs × {_month_points(now)}",
            lambda span: charts.vm_span(vm, span, now),
            4,
            measure,
        )
    finally:
        VmHourSample.objects.filter(vm__cluster__name=CLUSTER).delete()
        VmSample.objects.filter(vm__cluster__name=CLUSTER).delete()
        VirtualMachine.objects.filter(cluster__name=CLUSTER).delete()
        Template.objects.filter(name=CLUSTER).delete()
        Cluster.objects.filter(name=CLUSTER).delete()
