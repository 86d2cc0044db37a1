"""A host's figures through the day: each sync's report of a host gives at most one point a
minute, and the pruning loop keeps a day of minutes and thirty days of hours."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import driver, samples, sync
from hosts.models import HostHourSample, HostSample, VirtualMachine
from hosts.operations import spec_for


@pytest.fixture
def still_time(time_machine):
    """Time stands at a whole minute a week from now (past the sync fixtures' points) and
    moves only when shifted; the sync writes each host's next report."""
    start = samples.minute_of(timezone.now() + timedelta(days=7))
    time_machine.move_to(start, tick=False)
    samples.forget()
    return start


@pytest.fixture
def running_vm(sim_vm, sim_hosts):
    host = sim_hosts[0]
    vm = sim_vm()
    driver.define(host.uri, spec_for(vm))
    driver.start(host.uri, str(vm.uuid))
    VirtualMachine.objects.filter(pk=vm.pk).update(host=host, status="up")
    return vm


def test_a_sync_keeps_the_hosts_memory_and_vms_running_for_its_minute(
    sim_hosts, running_vm, still_time
):
    host = sim_hosts[0]

    sync.sync_host(host.pk)

    point = HostSample.objects.get(host=host, at=still_time)
    assert (point.vms_running, point.memory_used_mb, point.memory_given_mb) == (1, 128, 128)


def test_syncs_within_a_minute_keep_one_point_and_the_next_minute_adds_one(
    sim_hosts, still_time, time_machine
):
    host = sim_hosts[1]
    for _ in range(3):
        sync.sync_host(host.pk)
        time_machine.shift(15)
    assert HostSample.objects.filter(host=host, at__gte=still_time).count() == 1

    time_machine.shift(20)  # 65 s after the first: the next minute
    sync.sync_host(host.pk)

    minutes = list(
        HostSample.objects.filter(host=host, at__gte=still_time).values_list("at", flat=True)
    )
    assert minutes == [still_time, still_time + timedelta(minutes=1)]


@pytest.fixture
def day_and_a_half(make_host):
    """A host with a point every minute for the last 36 hours (CPU 10% in even minutes, 30%
    in odd ones), and an hourly point 31 days old."""
    host = make_host()
    now = samples.minute_of(timezone.now())
    HostSample.objects.bulk_create(
        HostSample(
            host=host,
            at=now - timedelta(minutes=m),
            cpu_percent=10.0 if m % 2 == 0 else 30.0,
            memory_given_mb=1024,
            memory_used_mb=512,
            vms_running=m % 4,
        )
        for m in range(36 * 60)
    )
    HostHourSample.objects.create(
        host=host,
        at=now - timedelta(days=31),
        cpu_percent=50,
        memory_given_mb=1,
        memory_used_mb=1,
        vms_running=1,
    )
    return host, now


def test_pruning_keeps_a_day_of_minutes_and_averages_older_whole_hours(db, day_and_a_half):
    host, now = day_and_a_half

    samples.prune(now)

    oldest_minute = HostSample.objects.filter(host=host).order_by("at").first().at
    assert now - timedelta(hours=25) < oldest_minute <= now - timedelta(hours=24)
    assert oldest_minute.minute == 0  # the hour the day starts in waits, whole
    hours = list(HostHourSample.objects.filter(host=host).order_by("at"))
    assert all(h.at.minute == 0 and h.at < oldest_minute for h in hours)
    assert len(hours) >= 10  # the 36 h less the day kept, in whole hours
    whole = hours[1:]  # the oldest hour holds only the fixture's first minutes
    assert {h.cpu_percent for h in whole} == {20.0}
    assert {(h.memory_given_mb, h.memory_used_mb, h.vms_running) for h in whole} == {(1024, 512, 3)}


def test_pruning_drops_hourly_points_older_than_thirty_days(db, day_and_a_half):
    host, now = day_and_a_half

    samples.prune(now)

    assert not HostHourSample.objects.filter(host=host, at__lt=now - timedelta(days=30)).exists()


def test_pruning_twice_changes_nothing_more(db, day_and_a_half):
    host, now = day_and_a_half
    samples.prune(now)
    before = list(HostHourSample.objects.filter(host=host).values_list("at", "cpu_percent"))

    assert samples.prune(now) == (0, 0)
    assert list(HostHourSample.objects.filter(host=host).values_list("at", "cpu_percent")) == before
