"""A host's or a VM's last day drawn on the server: SVG line charts of its minute points
(``hosts.samples``, ``hosts.vm_samples``) with a summary and an hourly table as their text
alternative. A host shows CPU, memory (given and used) and VMs running; a VM CPU, memory, disk
and network I/O. A cluster's charts (``hosts.cluster_charts``) are drawn by ``svg`` too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from hosts import samples, vm_samples
from hosts.models import Host, VirtualMachine

WIDTH, HEIGHT = 720, 120
LEFT, BOTTOM, TOP = 48, 18, 6
GAP = timedelta(minutes=2)  # no point for longer than this: the line breaks
KIB, MIB = 1024, 1024 * 1024


@dataclass
class Series:
    """One line: its name, the figure it reads from each point, and how it is drawn."""

    name: str
    field: str
    style: str


@dataclass
class Chart:
    key: str
    title: str
    unit: str
    series: list[Series]
    top: float  # the value at the top of the chart, in ``unit``
    per: float = 1  # the figures are divided by this to be in ``unit`` (bytes/s in KiB/s…)


@dataclass
class Column:
    """One column of the hourly table: the hour's average (or highest) of a figure."""

    heading: str
    field: str
    most: bool = False
    per: float = 1
    unit: str = ""


def _x(at: datetime, start: datetime) -> float:
    return (
        LEFT + (WIDTH - LEFT) * (at - start).total_seconds() / samples.MINUTES_KEPT.total_seconds()
    )


def places(points: list[NamedTuple], start: datetime) -> list[tuple[str, float]]:
    """Each point's x in the chart (formatted) and its time in seconds, worked out once for
    every line."""
    origin, scale = start.timestamp(), (WIDTH - LEFT) / samples.MINUTES_KEPT.total_seconds()
    seconds = [p.at.timestamp() for p in points]
    return [(f"{LEFT + scale * (t - origin):.1f}", t) for t in seconds]


def _path(
    points: list[NamedTuple], places: list[tuple[str, float]], field: str, chart: Chart
) -> str:
    index = points[0]._fields.index(field) if points else 0
    gap, height, top = GAP.total_seconds(), HEIGHT - BOTTOM - TOP, chart.top * chart.per
    parts, previous = [], None
    for point, (x, at) in zip(points, places, strict=True):
        value = point[index]
        if value is None:
            previous = None
            continue
        move = "L" if previous is not None and at - previous <= gap else "M"
        parts.append(f"{move}{x},{TOP + height * (1 - min(value, top) / top):.1f}")
        previous = at
    return "".join(parts)


def _summary(chart: Chart, points: list[NamedTuple]) -> str:
    if not points:
        return "No figures were recorded in the last 24 hours."
    sentences = []
    for series in chart.series:
        values = [(getattr(p, series.field), p.at) for p in points]
        known = [(v / chart.per, at) for v, at in values if v is not None]
        if not known:
            sentences.append(f"{series.name}: not measured.")
            continue
        highest, when = max(known, key=lambda pair: pair[0])
        average = sum(v for v, _ in known) / len(known)
        sentences.append(
            f"{series.name}: now {known[-1][0]:,.0f}{chart.unit}, average {average:,.0f}"
            f"{chart.unit}, highest {highest:,.0f}{chart.unit} at "
            f"{timezone.localtime(when):%H:%M}."
        )
    return " ".join(sentences)


def _axes(chart: Chart, start: datetime) -> SafeString:
    hours = [start + timedelta(hours=h) for h in range(0, 25, 6)]
    labels = format_html_join(
        "",
        '<text x="{}" y="{}" text-anchor="middle">{}</text>',
        ((f"{_x(at, start):.1f}", HEIGHT - 4, f"{timezone.localtime(at):%H:%M}") for at in hours),
    )
    return format_html(
        '<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text x="{}" y="{}" text-anchor="end">{}</text>'
        '<text x="{}" y="{}" text-anchor="end">0</text>{}',
        LEFT,
        HEIGHT - BOTTOM,
        WIDTH,
        HEIGHT - BOTTOM,
        LEFT - 4,
        TOP + 8,
        f"{chart.top:,.0f}{chart.unit}",
        LEFT - 4,
        HEIGHT - BOTTOM,
        labels,
    )


def svg(
    chart: Chart, points: list[NamedTuple], places: list[tuple[str, float]], start: datetime
) -> SafeString:
    """The chart as an SVG image whose title and description say what it shows."""
    lines = format_html_join(
        "",
        '<path class="line {}" d="{}"><title>{}</title></path>',
        ((s.style, _path(points, places, s.field, chart), s.name) for s in chart.series),
    )
    return format_html(
        '<svg role="img" viewBox="0 0 {} {}" aria-labelledby="{}-title {}-desc" '
        'class="corral-chart-svg"><title id="{}-title">{}</title><desc id="{}-desc">{}</desc>'
        "{}{}</svg>",
        WIDTH,
        HEIGHT,
        chart.key,
        chart.key,
        chart.key,
        chart.title,
        chart.key,
        _summary(chart, points),
        _axes(chart, start),
        lines,
    )


def _hourly(
    points: list[NamedTuple], places: list[tuple[str, float]], columns: list[Column]
) -> list[dict]:
    """Each hour's row of the table: its time and, in each column, the average (or the
    highest) of the figure's known values in it, "—" for none."""
    hours: dict[int, list[NamedTuple]] = {}
    for point, (_, at) in zip(points, places, strict=True):
        hours.setdefault(int(at // 3600), []).append(point)
    rows = []
    for number, group in hours.items():
        cells = []
        for column in columns:
            known = [v / column.per for p in group if (v := getattr(p, column.field)) is not None]
            if not known:
                cells.append("—")
                continue
            value = max(known) if column.most else sum(known) / len(known)
            cells.append(f"{value:.0f}{column.unit}")
        rows.append(
            {
                "hour": timezone.localtime(datetime.fromtimestamp(number * 3600, tz=UTC)),
                "cells": cells,
            }
        )
    return rows


def draw(
    points: list[NamedTuple],
    charts: list[Chart],
    columns: list[Column],
    caption: str,
    now: datetime,
) -> str:
    """The day's charts of ``points`` (minute points, oldest first) and their hourly table,
    as HTML."""
    start = now - samples.MINUTES_KEPT
    at = places(points, start)
    return render_to_string(
        "hosts/day_charts.html",
        {
            "charts": [{"chart": c, "svg": svg(c, points, at, start)} for c in charts],
            "caption": caption,
            "columns": columns,
            "hours": _hourly(points, at, columns),
            "points": len(points),
        },
    )


HOST_COLUMNS = [
    Column("CPU", "cpu_percent", unit="%"),
    Column("memory given (MiB)", "memory_given_mb"),
    Column("memory used (MiB)", "memory_used_mb"),
    Column("most VMs running", "vms_running", most=True),
]


def charts_for(host: Host, points: list[samples.Point]) -> list[Chart]:
    memory_top = max([host.memory_mb or 0, *(p.memory_given_mb for p in points), 1])
    vms_top = max([*(p.vms_running for p in points), 1])
    return [
        Chart(
            "cpu", "Host CPU in use, last 24 hours", "%", [Series("CPU", "cpu_percent", "a")], 100
        ),
        Chart(
            "memory",
            "Memory given to VMs and used by running VMs, last 24 hours",
            " MiB",
            [
                Series("Given to VMs", "memory_given_mb", "a"),
                Series("Used by running VMs", "memory_used_mb", "b"),
            ],
            memory_top,
        ),
        Chart(
            "vms",
            "VMs running, last 24 hours",
            "",
            [Series("VMs running", "vms_running", "a")],
            vms_top,
        ),
    ]


def last_day(host: Host, now: datetime | None = None) -> str:
    """The host's last-day charts and their hourly table, as HTML (one query)."""
    now = now or timezone.now()
    points = samples.last_day(host.pk, now)
    caption = f"{host.name}'s figures hour by hour, last 24 hours"
    return draw(points, charts_for(host, points), HOST_COLUMNS, caption, now)


VM_COLUMNS = [
    Column("CPU", "cpu_percent", unit="%"),
    Column("memory used (MiB)", "memory_used_mb"),
    Column("disk read (KiB/s)", "disk_read_bps", per=KIB),
    Column("disk written (KiB/s)", "disk_write_bps", per=KIB),
    Column("network received (KiB/s)", "net_rx_bps", per=KIB),
    Column("network sent (KiB/s)", "net_tx_bps", per=KIB),
]


def _rate_chart(key: str, title: str, series: list[Series], points: list[NamedTuple]) -> Chart:
    """A chart of bytes a second, in KiB/s or, past one MiB/s, MiB/s."""
    highest = max(
        [getattr(p, s.field) or 0 for p in points for s in series] + [1],
    )
    per, unit = (MIB, " MiB/s") if highest >= MIB else (KIB, " KiB/s")
    return Chart(key, title, unit, series, max(highest / per, 1), per)


def vm_charts_for(vm: VirtualMachine, points: list[vm_samples.Point]) -> list[Chart]:
    memory_top = max([vm.memory_mb or 0, *(p.memory_used_mb or 0 for p in points), 1])
    return [
        Chart(
            "cpu",
            "VM CPU in use (of its vCPUs), last 24 hours",
            "%",
            [Series("CPU", "cpu_percent", "a")],
            100,
        ),
        Chart(
            "memory",
            "Memory used by the guest, last 24 hours",
            " MiB",
            [Series("Memory used", "memory_used_mb", "a")],
            memory_top,
        ),
        _rate_chart(
            "disk",
            "Disk read and written, last 24 hours",
            [Series("Read", "disk_read_bps", "a"), Series("Written", "disk_write_bps", "b")],
            points,
        ),
        _rate_chart(
            "network",
            "Network received and sent, last 24 hours",
            [Series("Received", "net_rx_bps", "a"), Series("Sent", "net_tx_bps", "b")],
            points,
        ),
    ]


def vm_last_day(vm: VirtualMachine, now: datetime | None = None) -> str:
    """The VM's last-day charts and their hourly table, as HTML (one query)."""
    now = now or timezone.now()
    points = vm_samples.last_day(vm.pk, now)
    caption = f"{vm.name}'s figures hour by hour, last 24 hours"
    return draw(points, vm_charts_for(vm, points), VM_COLUMNS, caption, now)
