"""A VM's figures through the day: once a minute the sync reads its host's running VMs'
counters and keeps one point a VM, rates worked out from the previous minute's counters, all
in one statement; the pruning loop keeps a day of minutes and thirty days of hours; a VM
deleted takes its points with it."""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import driver, samples, services, sync, vm_samples
from hosts.models import VirtualMachine, VmHourSample, VmSample
from hosts.operations import spec_for


@pytest.fixture
def still_time(time_machine):
    """Time stands at a whole minute a week from now and moves only when shifted; the sync
    reads each host's VMs' counters in its next report."""
    start = samples.minute_of(timezone.now() + timedelta(days=7))
    time_machine.move_to(start, tick=False)
    samples.forget()
    vm_samples.forget()
    return start


@pytest.fixture
def run_vm(make_vm, make_template, sim_cluster, sim_hosts):
    """run_vm(host_index=0) -> a VM with a disk and a NIC running on that simulated host."""
    template = make_template(memory_mb=128, vcpus=1, disk_gb=1, networks=["default"])

    def run(host_index: int = 0) -> VirtualMachine:
        host = sim_hosts[host_index]
        vm = make_vm(cluster=sim_cluster, template=template)
        driver.define(host.uri, spec_for(vm))
        driver.start(host.uri, str(vm.uuid))
        VirtualMachine.objects.filter(pk=vm.pk).update(host=host, status="up")
        return vm

    return run


def _vm_sample_writes(queries) -> list[str]:
    return [q["sql"] for q in queries if "hosts_vmsample" in q["sql"] and "INSERT" in q["sql"]]


def test_the_first_minute_a_vm_is_read_keeps_a_point_without_rates(sim_hosts, run_vm, still_time):
    vm = run_vm()

    sync.sync_host(sim_hosts[0].pk)

    point = VmSample.objects.get(vm=vm, at=still_time)
    rates = (point.cpu_percent, point.disk_read_bps, point.net_rx_bps)
    assert rates == (None, None, None)  # a rate needs two reads


def test_the_next_minute_has_rates_from_the_counters_read_a_minute_apart(
    sim_hosts, run_vm, still_time, time_machine
):
    vm = run_vm()
    sync.sync_host(sim_hosts[0].pk)
    time.sleep(0.3)  # the test driver's counters follow the real clock: let them move
    time_machine.shift(60)

    sync.sync_host(sim_hosts[0].pk)

    point = VmSample.objects.get(vm=vm, at=still_time + timedelta(minutes=1))
    # Counters that moved in 0.3 s, spread over the 60 s between the two reads.
    assert 0 < point.cpu_percent < 5
    assert point.disk_read_bps > 0 and point.disk_write_bps > 0
    assert point.net_rx_bps > point.disk_read_bps  # the test driver's are 20 times faster
    assert point.net_tx_bps > 0
    # The test driver's guests say, through their balloon, that half their memory is in use.
    assert point.memory_used_mb == vm.memory_mb // 2


def test_syncs_within_a_minute_write_the_vms_points_once(
    sim_hosts, run_vm, still_time, time_machine
):
    vm = run_vm()
    with CaptureQueriesContext(connection) as first:
        sync.sync_host(sim_hosts[0].pk)
    with CaptureQueriesContext(connection) as later:
        for _ in range(3):
            time_machine.shift(15)
            sync.sync_host(sim_hosts[0].pk)

    assert len(_vm_sample_writes(first.captured_queries)) == 1
    assert _vm_sample_writes(later.captured_queries) == []
    assert VmSample.objects.filter(vm=vm).count() == 1


def test_a_rounds_points_of_many_vms_take_one_statement(
    sim_hosts, run_vm, still_time, django_assert_max_num_queries
):
    host = sim_hosts[1]
    vms = [run_vm(1) for _ in range(5)]
    report = driver.host_report(host.uri, usage=True)

    with django_assert_max_num_queries(1):
        written = vm_samples.record(host.pk, vms, report, timezone.now())

    assert written == 5
    assert VmSample.objects.filter(vm__in=vms, at=still_time).count() == 5


def test_a_report_read_without_counters_writes_no_point(sim_hosts, run_vm, still_time):
    host = sim_hosts[0]
    vm = run_vm()

    written = vm_samples.record(host.pk, [vm], driver.host_report(host.uri), timezone.now())

    assert written == 0
    assert not VmSample.objects.filter(vm=vm).exists()


@pytest.fixture
def vm_day_and_a_half(sim_vm):
    """A VM with a point every minute for the last 36 hours (CPU 10% in even minutes, 30% in
    odd ones; disk read 1,000 B/s, unknown in every fourth minute), and an hourly point 31 days
    old."""
    vm = sim_vm()
    now = samples.minute_of(timezone.now())
    VmSample.objects.bulk_create(
        VmSample(
            vm=vm,
            at=now - timedelta(minutes=m),
            cpu_percent=10.0 if m % 2 == 0 else 30.0,
            memory_used_mb=100,
            disk_read_bps=None if m % 4 == 0 else 1000,
            disk_write_bps=0,
            net_rx_bps=2000,
            net_tx_bps=None,
        )
        for m in range(36 * 60)
    )
    VmHourSample.objects.create(vm=vm, at=now - timedelta(days=31), cpu_percent=50)
    return vm, now


def test_pruning_averages_a_vms_older_whole_hours_and_drops_the_oldest(db, vm_day_and_a_half):
    vm, now = vm_day_and_a_half

    samples.prune(now)

    oldest_minute = VmSample.objects.filter(vm=vm).order_by("at").first().at
    assert now - timedelta(hours=25) < oldest_minute <= now - timedelta(hours=24)
    hours = list(VmHourSample.objects.filter(vm=vm).order_by("at"))
    assert len(hours) >= 10
    assert hours[0].at >= now - timedelta(days=30)
    whole = hours[1:]
    figures = {
        (h.cpu_percent, h.memory_used_mb, h.disk_read_bps, h.net_rx_bps, h.net_tx_bps)
        for h in whole
    }
    assert figures == {(20.0, 100, 1000, 2000, None)}  # unknown minutes left out of the mean


def test_deleting_a_vm_deletes_its_points(db, vm_day_and_a_half):
    vm, now = vm_day_and_a_half
    samples.prune(now)

    services.delete_vm(vm)

    assert not VmSample.objects.filter(vm_id=vm.pk).exists()
    assert not VmHourSample.objects.filter(vm_id=vm.pk).exists()
