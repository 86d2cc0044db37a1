"""A cluster's reservable capacity over time: what accepted leases reserve and what is free.

Built on the same view of capacity that accepts or refuses leases (``reservable_rooms``): a
host's capacity is its CPUs and memory times the cluster's overcommit, a whole-host
reservation takes all of it, and only Up hosts have free capacity to offer. Usage changes
only where an allocation begins or ends, so the timeline is a list of steps between those
instants, found in one sweep.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hosts.models import HostStatus
from leases.capacity import reservable_rooms
from leases.rooms import HostRoom


@dataclass
class Step:
    start: datetime
    end: datetime
    reserved_vcpus: int
    free_vcpus: int
    reserved_memory_mb: int
    free_memory_mb: int


@dataclass
class Timeline:
    start: datetime
    end: datetime
    hosts: int
    hosts_up: int
    capacity_vcpus: int
    capacity_memory_mb: int
    steps: list[Step] = field(default_factory=list)


def _share(room: HostRoom, used: list[int]) -> tuple[int, int, int, int]:
    """What one host adds to the totals: reserved and free vCPUs, reserved and free memory."""
    cpu, memory, whole = used
    if whole:
        return room.cpus, 0, room.memory_mb, 0
    if room.host.status != HostStatus.UP:
        return cpu, 0, memory, 0
    return cpu, max(0, room.cpus - cpu), memory, max(0, room.memory_mb - memory)


def cluster_timeline(cluster_id: int, start: datetime, end: datetime) -> Timeline:
    """Reserved and free reservable capacity of a cluster for every step of [start, end)."""
    rooms = [
        room
        for room in reservable_rooms(start, end, lock=False).values()
        if room.host.cluster_id == cluster_id
    ]
    changes: dict[datetime, list[tuple[int, int, object]]] = defaultdict(list)
    for index, room in enumerate(rooms):
        for slot in room.usage:
            if slot.start < end and slot.end > start:
                changes[max(slot.start, start)].append((index, 1, slot))
                if slot.end < end:
                    changes[slot.end].append((index, -1, slot))
    used = [[0, 0, 0] for _ in rooms]  # vCPUs, memory, whole-host reservations
    totals = [0, 0, 0, 0]
    for room, use in zip(rooms, used, strict=True):
        totals = [t + s for t, s in zip(totals, _share(room, use), strict=True)]
    timeline = Timeline(
        start=start,
        end=end,
        hosts=len(rooms),
        hosts_up=sum(room.host.status == HostStatus.UP for room in rooms),
        capacity_vcpus=sum(room.cpus for room in rooms),
        capacity_memory_mb=sum(room.memory_mb for room in rooms),
    )
    instants = sorted({start, *changes})
    for position, instant in enumerate(instants):
        # Ends before beginnings at the same instant, as the capacity check counts them.
        for index, sign, slot in sorted(changes.get(instant, []), key=lambda c: c[1]):
            before = _share(rooms[index], used[index])
            used[index][0] += sign * slot.vcpus
            used[index][1] += sign * slot.memory_mb
            used[index][2] += sign * int(slot.whole_host)
            after = _share(rooms[index], used[index])
            totals = [t + a - b for t, a, b in zip(totals, after, before, strict=True)]
        step_end = instants[position + 1] if position + 1 < len(instants) else end
        values = (totals[0], totals[1], totals[2], totals[3])
        last = timeline.steps[-1] if timeline.steps else None
        if last is not None and values == (
            last.reserved_vcpus,
            last.free_vcpus,
            last.reserved_memory_mb,
            last.free_memory_mb,
        ):
            last.end = step_end
        else:
            timeline.steps.append(Step(instant, step_end, *values))
    return timeline


# -- drawing ---------------------------------------------------------------------------------

WIDTH, HEIGHT = 760, 200
LEFT, RIGHT, TOP, BOTTOM = 64, 28, 10, 28


@dataclass
class Bar:
    step: Step
    x: float
    width: float
    reserved_y: float
    reserved_height: float
    free_y: float
    free_height: float
    reserved: int
    free: int


@dataclass
class Chart:
    """One resource of a timeline laid out for an SVG: bars of reserved and free capacity
    stacked per step, the capacity line, and the axis ticks."""

    resource: str
    unit: str
    capacity: int
    width: int = WIDTH
    height: int = HEIGHT
    bars: list[Bar] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    y_ticks: list[tuple[float, int]] = field(default_factory=list)
    capacity_y: float = TOP
    left: int = LEFT
    right: int = WIDTH - RIGHT
    bottom: int = HEIGHT - BOTTOM


def chart(timeline: Timeline, resource: str) -> Chart:
    """Lay out ``resource`` ("vcpus" or "memory") of ``timeline`` on the chart's canvas."""
    if resource == "vcpus":
        capacity, unit = timeline.capacity_vcpus, "vCPUs"
        figures = [(s, s.reserved_vcpus, s.free_vcpus) for s in timeline.steps]
    else:
        capacity, unit = timeline.capacity_memory_mb, "MiB"
        figures = [(s, s.reserved_memory_mb, s.free_memory_mb) for s in timeline.steps]
    drawn = Chart(resource=resource, unit=unit, capacity=capacity)
    span = (timeline.end - timeline.start).total_seconds() or 1.0
    plot_width = drawn.right - drawn.left
    plot_height = drawn.bottom - TOP
    top_value = max([capacity, *(reserved for _, reserved, _ in figures)]) or 1

    def x_of(moment: datetime) -> float:
        return round(drawn.left + plot_width * (moment - timeline.start).total_seconds() / span, 2)

    def y_of(value: float) -> float:
        return round(drawn.bottom - plot_height * value / top_value, 2)

    for step, reserved, free in figures:
        x = x_of(step.start)
        reserved_top = y_of(reserved)
        free_top = y_of(reserved + free)
        drawn.bars.append(
            Bar(
                step=step,
                x=x,
                width=round(x_of(step.end) - x, 2),
                reserved_y=reserved_top,
                reserved_height=round(drawn.bottom - reserved_top, 2),
                free_y=free_top,
                free_height=round(reserved_top - free_top, 2),
                reserved=reserved,
                free=free,
            )
        )
    drawn.capacity_y = y_of(capacity)
    drawn.y_ticks = [(y_of(v), v) for v in sorted({0, capacity // 2, capacity})]
    days = max(1, round(span / 86400))
    every = max(1, days // 10)
    day = timeline.start.replace(hour=0, minute=0, second=0, microsecond=0)
    if day < timeline.start:
        day += timedelta(days=1)
    count = 0
    while day <= timeline.end:
        if count % every == 0:
            drawn.x_ticks.append((x_of(day), f"{day:%d %b}"))
        day += timedelta(days=1)
        count += 1
    return drawn
