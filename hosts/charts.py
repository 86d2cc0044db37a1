"""A host's or a VM's last day, week or month (``hosts.spans``) drawn on the server: SVG line
charts of its points (``hosts.samples``, ``hosts.vm_samples``) with a summary and a table (an
hour a row, a day a row for a week or a month) as their text alternative. A host shows CPU,
memory (given and used) and VMs running; a VM CPU, memory, disk and network I/O. A cluster's
charts (``hosts.cluster_charts``) are drawn by ``draw`` too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from hosts import samples, vm_samples
from hosts.models import Host, VirtualMachine
from hosts.spans import DAY, Span

WIDTH, HEIGHT = 720, 120
LEFT, BOTTOM, TOP = 48, 18, 6
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
    """One column of the table: the average (or highest) of a figure in a row's hour or day."""

    heading: str
    field: str
    most: bool = False
    per: float = 1
    unit: str = ""


def _x(at: datetime, start: datetime, span: Span) -> float:
    return LEFT + (WIDTH - LEFT) * (at - start).total_seconds() / span.length.total_seconds()


def places(points: list[NamedTuple], start: datetime, span: Span) -> list[tuple[str, float]]:
    """Each point's x in the chart (formatted) and its time in seconds, worked out once for
    every line."""
    origin, scale = start.timestamp(), (WIDTH - LEFT) / span.length.total_seconds()
    seconds = [p.at.timestamp() for p in points]
    return [(f"{LEFT + scale * (t - origin):.1f}", t) for t in seconds]


def _path(
    points: list[NamedTuple], places: list[tuple[str, float]], field: str, chart: Chart, gap: float
) -> str:
    index = points[0]._fields.index(field) if points else 0
    height, top = HEIGHT - BOTTOM - TOP, chart.top * chart.per
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


def _summary(chart: Chart, points: list[NamedTuple], span: Span) -> str:
    if not points:
        return f"No figures were recorded in the {span.words}."
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
            f"{date_format(timezone.localtime(when), span.when_format)}."
        )
    return " ".join(sentences)


def _axes(chart: Chart, start: datetime, span: Span) -> SafeString:
    labels = format_html_join(
        "",
        '<text x="{}" y="{}" text-anchor="middle">{}</text>',
        (
            (f"{_x(at, start, span):.1f}", HEIGHT - 4, date_format(at, span.tick_format))
            for at in map(timezone.localtime, span.ticks(start))
        ),
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
    chart: Chart,
    points: list[NamedTuple],
    places: list[tuple[str, float]],
    span: Span,
    start: datetime,
) -> SafeString:
    """The chart as an SVG image whose title and description say what it shows."""
    gap = span.gap.total_seconds()
    lines = format_html_join(
        "",
        '<path class="line {}" d="{}"><title>{}</title></path>',
        ((s.style, _path(points, places, s.field, chart, gap), s.name) for s in chart.series),
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
        _summary(chart, points, span),
        _axes(chart, start, span),
        lines,
    )


def _rows(
    points: list[NamedTuple], places: list[tuple[str, float]], columns: list[Column], span: Span
) -> list[dict]:
    """Each hour's (or, for an ``hourly`` span, each local day's) row of the table: its start
    and, in each column, the average (or the highest) of the figure's known values in it, "—"
    for none."""
    hours: dict[int, list[NamedTuple]] = {}
    for point, (_, at) in zip(points, places, strict=True):
        hours.setdefault(int(at // 3600), []).append(point)
    groups: dict[datetime, list[NamedTuple]] = {}
    for number, group in hours.items():
        start = timezone.localtime(datetime.fromtimestamp(number * 3600, tz=UTC))
        if span.hourly:
            start = start.replace(hour=0)
        groups.setdefault(start, []).extend(group)
    rows = []
    for start, group in groups.items():
        cells = []
        for column in columns:
            known = [v / column.per for p in group if (v := getattr(p, column.field)) is not None]
            if not known:
                cells.append("—")
                continue
            value = max(known) if column.most else sum(known) / len(known)
            cells.append(f"{value:.0f}{column.unit}")
        rows.append({"start": start, "cells": cells})
    return rows


def draw(
    points: list[NamedTuple],
    charts: list[Chart],
    columns: list[Column],
    whose: str,
    span: Span,
    now: datetime,
) -> str:
    """The charts of ``points`` (the span's, oldest first) and their table, captioned with
    ``whose`` figures they are, as HTML."""
    start = now - span.length
    at = places(points, start, span)
    return render_to_string(
        "hosts/day_charts.html",
        {
            "charts": [{"chart": c, "svg": svg(c, points, at, span, start)} for c in charts],
            "caption": f"{whose} figures {span.row} by {span.row}, {span.words}",
            "columns": columns,
            "rows": _rows(points, at, columns, span),
            "points": len(points),
            "span": span,
        },
    )


HOST_COLUMNS = [
    Column("CPU", "cpu_percent", unit="%"),
    Column("memory given (MiB)", "memory_given_mb"),
    Column("memory used (MiB)", "memory_used_mb"),
    Column("most VMs running", "vms_running", most=True),
]


def charts_for(host: Host, points: list[samples.Point], span: Span) -> list[Chart]:
    memory_top = max([host.memory_mb or 0, *(p.memory_given_mb for p in points), 1])
    vms_top = max([*(p.vms_running for p in points), 1])
    return [
        Chart(
            "cpu", f"Host CPU in use, {span.words}", "%", [Series("CPU", "cpu_percent", "a")], 100
        ),
        Chart(
            "memory",
            f"Memory given to VMs and used by running VMs, {span.words}",
            " MiB",
            [
                Series("Given to VMs", "memory_given_mb", "a"),
                Series("Used by running VMs", "memory_used_mb", "b"),
            ],
            memory_top,
        ),
        Chart(
            "vms",
            f"VMs running, {span.words}",
            "",
            [Series("VMs running", "vms_running", "a")],
            vms_top,
        ),
    ]


def host_span(host: Host, span: Span = DAY, now: datetime | None = None) -> str:
    """The host's charts of ``span`` and their table, as HTML (one query for the day, two
    for longer spans)."""
    now = now or timezone.now()
    points = samples.points_of(samples.HOSTS_KEPT, samples.Point, span, now, host_id=host.pk)
    return draw(points, charts_for(host, points, span), HOST_COLUMNS, f"{host.name}'s", span, now)


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


def vm_charts_for(vm: VirtualMachine, points: list[vm_samples.Point], span: Span) -> list[Chart]:
    memory_top = max([vm.memory_mb or 0, *(p.memory_used_mb or 0 for p in points), 1])
    return [
        Chart(
            "cpu",
            f"VM CPU in use (of its vCPUs), {span.words}",
            "%",
            [Series("CPU", "cpu_percent", "a")],
            100,
        ),
        Chart(
            "memory",
            f"Memory used by the guest, {span.words}",
            " MiB",
            [Series("Memory used", "memory_used_mb", "a")],
            memory_top,
        ),
        _rate_chart(
            "disk",
            f"Disk read and written, {span.words}",
            [Series("Read", "disk_read_bps", "a"), Series("Written", "disk_write_bps", "b")],
            points,
        ),
        _rate_chart(
            "network",
            f"Network received and sent, {span.words}",
            [Series("Received", "net_rx_bps", "a"), Series("Sent", "net_tx_bps", "b")],
            points,
        ),
    ]


def vm_span(vm: VirtualMachine, span: Span = DAY, now: datetime | None = None) -> str:
    """The VM's charts of ``span`` and their table, as HTML (one query for the day, two for
    longer spans)."""
    now = now or timezone.now()
    points = samples.points_of(samples.VMS_KEPT, vm_samples.Point, span, now, vm_id=vm.pk)
    return draw(points, vm_charts_for(vm, points, span), VM_COLUMNS, f"{vm.name}'s", span, now)
