"""A cluster's figures through the day (``hosts.cluster_samples``): the census loop gives each
cluster a point a minute from its hosts' points and its VMs as they stand, and the pruning loop
keeps a day of minutes and thirty days of hours."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import cluster_samples, driver, samples, sync
from hosts.models import (
    ClusterHourSample,
    ClusterSample,
    Host,
    HostStatus,
    VirtualMachine,
    VmStatus,
)
from hosts.operations import spec_for
from hosts.spans import DAY
from pools import services as pool_services
from tests.pools.fixtures import add_pool_vms


@pytest.fixture
def still_time(time_machine):
    """Time stands at a whole minute a week from now and moves only when shifted."""
    start = samples.minute_of(timezone.now() + timedelta(days=7))
    time_machine.move_to(start, tick=False)
    samples.forget()
    return start


def test_a_clusters_minute_adds_up_its_hosts_load_and_counts_its_vms_by_state(
    sim_cluster, sim_hosts, sim_vm, still_time, django_assert_max_num_queries
):
    host = sim_hosts[0]
    running = sim_vm()
    driver.define(host.uri, spec_for(running))
    driver.start(host.uri, str(running.uuid))
    VirtualMachine.objects.filter(pk=running.pk).update(host=host, status=VmStatus.UP)
    sim_vm()  # Down
    sim_vm(status=VmStatus.STARTING)
    for each in sim_hosts:
        sync.sync_host(each.pk)  # their size and the CPU in use

    with django_assert_max_num_queries(3):
        assert cluster_samples.census() >= 1

    point = ClusterSample.objects.get(cluster=sim_cluster, at=still_time)
    hosts = Host.objects.filter(cluster=sim_cluster, status=HostStatus.UP)
    assert point.memory_given_mb == 128  # the running VM's
    assert point.memory_capacity_mb == sum(h.memory_mb for h in hosts) > 0
    measured = [h.cpu_usage_percent for h in hosts if h.cpu_usage_percent is not None]
    expected = sum(measured) / len(measured) if measured else None
    assert point.cpu_percent == (None if expected is None else pytest.approx(expected))
    assert (point.vms_up, point.vms_down, point.vms_changing, point.vms_paused) == (1, 1, 1, 0)


def test_a_clusters_pool_vms_count_as_free_while_nobody_holds_them_and_taken_after(
    make_pool, make_cluster, make_template, pool_user, still_time, time_machine
):
    cluster = make_cluster()
    pool = make_pool(cluster=cluster, template=make_template(cluster=cluster), size=3)
    add_pool_vms(pool, [VmStatus.UP, VmStatus.UP, VmStatus.DOWN])
    cluster_samples.census()
    first = ClusterSample.objects.get(cluster=cluster, at=still_time)
    assert (first.pool_vms_free, first.pool_vms_taken) == (2, 0)

    pool_services.allocate_vm(pool, pool_user(pool))
    time_machine.shift(60)
    cluster_samples.census()

    second = ClusterSample.objects.get(cluster=cluster, at=still_time + timedelta(minutes=1))
    assert (second.pool_vms_free, second.pool_vms_taken) == (1, 1)


def test_the_dashboards_day_adds_the_clusters_up_minute_by_minute(
    make_cluster, still_time, django_assert_max_num_queries
):
    clusters = [make_cluster(), make_cluster()]
    for number, cluster in enumerate(clusters):
        ClusterSample.objects.bulk_create(
            ClusterSample(
                cluster=cluster,
                at=still_time - timedelta(minutes=m),
                cpu_percent=10.0 * (number + 1),
                memory_given_mb=100,
                memory_capacity_mb=1000,
                vms_up=number + 1,
                vms_paused=0,
                vms_down=0,
                vms_changing=0,
                vms_unknown=0,
                pool_vms_free=1,
                pool_vms_taken=0,
            )
            for m in range(3)
        )

    with django_assert_max_num_queries(1):
        points = cluster_samples.points_of([c.pk for c in clusters], DAY)

    assert [p.at for p in points] == [still_time - timedelta(minutes=m) for m in (2, 1, 0)]
    assert {(p.cpu_percent, p.memory_given_mb, p.vms_up, p.pool_vms_free) for p in points} == {
        (15.0, 200, 3, 2)
    }


def test_pruning_averages_old_hours_and_drops_those_past_thirty_days(make_cluster, still_time):
    cluster = make_cluster()
    hour = still_time.replace(minute=0)  # whole hours only: each averages 20 % and 1 VM
    figures = dict(
        memory_given_mb=100,
        memory_capacity_mb=1000,
        vms_paused=0,
        vms_down=0,
        vms_changing=0,
        vms_unknown=0,
        pool_vms_free=0,
        pool_vms_taken=0,
    )
    ClusterSample.objects.bulk_create(
        ClusterSample(
            cluster=cluster,
            at=hour - timedelta(minutes=m),
            cpu_percent=10.0 if m % 2 else 30.0,
            vms_up=m % 2 * 2,
            **figures,
        )
        for m in range(1, 36 * 60 + 1)
    )
    ClusterHourSample.objects.create(
        cluster=cluster, at=hour - timedelta(days=31), cpu_percent=5, vms_up=1, **figures
    )

    minutes, hours = samples.prune()  # hosts', VMs' and clusters'

    assert hours == 1
    kept = ClusterSample.objects.filter(cluster=cluster)
    assert kept.earliest("at").at >= still_time - timedelta(hours=25)
    assert minutes == 36 * 60 - kept.count()
    averaged = ClusterHourSample.objects.filter(cluster=cluster)
    assert averaged.count() >= 11
    assert {(h.cpu_percent, h.vms_up) for h in averaged} == {(20.0, 1)}
