"""CPU load from a host's real counters: the difference between two reports of one host.

libvirt gives cumulative counters (the host's busy and total CPU time, each domain's CPU
time), so a load is the change between two samples. The last sample of each host is kept in
the syncing process; the first report a process reads of a host (after a start or a shard
handover) has nothing to compare with and leaves the figures as they were. Hosts without
counters (libvirt's test driver reports constant ones) give no figure at all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from hosts import driver

# A load is written only when it moves by at least this many points: a real host's counters
# change on every report, and the scheduler needs no finer figure.
WRITE_STEP = 2.0


@dataclass(frozen=True)
class Sample:
    read_at_ns: int
    host_times: tuple[int, int] | None
    domain_times: dict[str, int]


_samples: dict[int, Sample] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Load:
    """Percent of the host's CPUs in use, and each domain's percent of its own vCPUs."""

    host_percent: float | None
    domain_percent: dict[str, float]


def _sample(report: driver.HostReport) -> Sample:
    read_at = report.read_at.timestamp() if report.read_at else 0.0
    return Sample(
        read_at_ns=int(read_at * 1e9),
        host_times=report.cpu_times_ns,
        domain_times={d.uuid: d.cpu_time_ns for d in report.domains if d.cpu_time_ns is not None},
    )


def measure(host_id: int, report: driver.HostReport, vcpus: dict[str, int]) -> Load:
    """The load since this process's previous report of ``host_id`` (``vcpus``: each
    domain's vCPU count by uuid), remembering this report for the next one."""
    current = _sample(report)
    with _lock:
        previous = _samples.get(host_id)
        _samples[host_id] = current
    if previous is None:
        return Load(None, {})
    host_percent = None
    if current.host_times and previous.host_times:
        busy = current.host_times[0] - previous.host_times[0]
        total = current.host_times[1] - previous.host_times[1]
        if total > 0 and busy >= 0:
            host_percent = round(min(100.0, 100.0 * busy / total), 1)
    elapsed = current.read_at_ns - previous.read_at_ns
    domain_percent = {}
    if elapsed > 0:
        for uuid, used in current.domain_times.items():
            before = previous.domain_times.get(uuid)
            if before is None or used < before or not vcpus.get(uuid):
                continue  # new, restarted, or not Corral's
            share = 100.0 * (used - before) / (elapsed * vcpus[uuid])
            domain_percent[uuid] = round(min(100.0, share), 1)
    return Load(host_percent, domain_percent)


def moved(before: float | None, after: float | None) -> bool:
    """Worth writing: a figure appears, disappears, or moves by WRITE_STEP points or more."""
    if before is None or after is None:
        return before is not after
    return abs(before - after) >= WRITE_STEP
