"""A running VM's figures kept for its charts: once a minute the sync asks a host for its
running domains' counters too (``driver.host_report(usage=True)``) and writes one point for
each of Corral's VMs among them, all in one statement. A rate is the change of a counter since
the previous minute's read, so a point stands for the minute before it; the pruning loop
(``hosts.samples.prune``) keeps a day of minutes and thirty days of hours."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import NamedTuple

from hosts import driver
from hosts.models import VirtualMachine, VmSample
from hosts.samples import EachMinute, minute_of

# Counters read further apart than this give no rate: an average over a longer gap would
# draw a flat line where the VM was not watched.
RATE_SPAN = timedelta(minutes=5)

# The minute this process last wrote the points of each host's VMs, and the counters it read
# then (their time, and each running domain's by uuid).
_written = EachMinute()
_counters: dict[int, tuple[datetime, dict[str, driver.DomainUsage]]] = {}
_lock = threading.Lock()


class Point(NamedTuple):
    """One minute of a VM, as its charts read it."""

    at: datetime
    cpu_percent: float | None
    memory_used_mb: int | None
    disk_read_bps: int | None
    disk_write_bps: int | None
    net_rx_bps: int | None
    net_tx_bps: int | None


FIGURES = Point._fields[1:]


def due(host_id: int, now: datetime) -> bool:
    """Whether the host's next report should read its VMs' counters: this process has not
    written their points of the minute of ``now``."""
    return _written.due(host_id, now)


def _rate(now: int | None, before: int | None, seconds: float) -> int | None:
    if now is None or before is None or now < before:
        return None  # not given, or the counter started again (the domain restarted)
    return round((now - before) / seconds)


def _point(
    vm: VirtualMachine,
    usage: driver.DomainUsage,
    before: driver.DomainUsage | None,
    seconds: float,
    minute: datetime,
) -> VmSample:
    cpu = None
    if before is not None:
        used = _rate(usage.cpu_time_ns, before.cpu_time_ns, seconds)
        if used is not None and vm.vcpus:
            cpu = round(min(100.0, 100.0 * used / (1e9 * vm.vcpus)), 1)
    else:
        before = driver.DomainUsage()
    return VmSample(
        vm_id=vm.pk,
        at=minute,
        cpu_percent=cpu,
        memory_used_mb=usage.memory_used_mb,
        disk_read_bps=_rate(usage.disk_read_bytes, before.disk_read_bytes, seconds),
        disk_write_bps=_rate(usage.disk_written_bytes, before.disk_written_bytes, seconds),
        net_rx_bps=_rate(usage.net_rx_bytes, before.net_rx_bytes, seconds),
        net_tx_bps=_rate(usage.net_tx_bytes, before.net_tx_bytes, seconds),
    )


def record(host_id: int, vms: list[VirtualMachine], report: driver.HostReport, now) -> int:
    """Keep the point of the minute of ``now`` of each of ``vms`` the report read running
    with its counters, unless this process wrote that minute of the host already (a second
    process writing it, after a shard handover, replaces it). One statement, none for a
    report without counters; the number of points written."""
    read = {d.uuid: d.usage for d in report.domains if d.usage is not None}
    if not read:
        return 0
    minute, read_at = minute_of(now), report.read_at or now
    if not _written.claim(host_id, now):
        return 0
    with _lock:
        previous_at, previous = _counters.get(host_id, (read_at, {}))
        _counters[host_id] = (read_at, read)
    seconds = (read_at - previous_at).total_seconds()
    if not 0 < seconds <= RATE_SPAN.total_seconds():
        previous = {}
    points = [
        _point(vm, read[str(vm.uuid)], previous.get(str(vm.uuid)), seconds, minute)
        for vm in vms
        if str(vm.uuid) in read
    ]
    if points:
        VmSample.objects.bulk_create(
            points,
            update_conflicts=True,
            unique_fields=["vm", "at"],
            update_fields=list(FIGURES),
        )
    return len(points)


def forget() -> None:
    """Forget which minutes this process wrote and the counters it read."""
    _written.forget()
    with _lock:
        _counters.clear()
