"""A host's last day drawn on the server: one SVG line chart each of CPU, memory (given and
used) and VMs running, with a summary and an hourly table as their text alternative."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from hosts import samples
from hosts.models import Host

WIDTH, HEIGHT = 720, 120
LEFT, BOTTOM, TOP = 48, 18, 6
GAP = timedelta(minutes=2)  # no point for longer than this: the line breaks


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
    top: float  # the value at the top of the chart


def _x(at: datetime, start: datetime) -> float:
    return (
        LEFT + (WIDTH - LEFT) * (at - start).total_seconds() / samples.MINUTES_KEPT.total_seconds()
    )


def places(points: list, start: datetime) -> list[tuple[str, float]]:
    """Each point's x in the chart (formatted) and its time in seconds, worked out once for
    every line."""
    origin, scale = start.timestamp(), (WIDTH - LEFT) / samples.MINUTES_KEPT.total_seconds()
    seconds = [p.at.timestamp() for p in points]
    return [(f"{LEFT + scale * (t - origin):.1f}", t) for t in seconds]


def _path(points: list, places: list[tuple[str, float]], field: str, top: float) -> str:
    """The line of ``field`` through ``points`` (named tuples of one kind: a host's, a
    cluster's…), broken where minutes are missing."""
    if not points:
        return ""
    index, gap, height = (
        type(points[0])._fields.index(field),
        GAP.total_seconds(),
        HEIGHT - BOTTOM - TOP,
    )
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


def _summary(chart: Chart, points: list) -> str:
    if not points:
        return "No figures were recorded in the last 24 hours."
    sentences = []
    for series in chart.series:
        values = [(getattr(p, series.field), p.at) for p in points]
        known = [(v, at) for v, at in values if v is not None]
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


def svg(chart: Chart, points: list, places: list[tuple[str, float]], start: datetime) -> SafeString:
    """The chart as an SVG image whose title and description say what it shows."""
    lines = format_html_join(
        "",
        '<path class="line {}" d="{}"><title>{}</title></path>',
        ((s.style, _path(points, places, s.field, chart.top), s.name) for s in chart.series),
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


def _hourly(points: list[samples.Point], places: list[tuple[str, float]]) -> list[dict]:
    """Each hour's average figures (the most VMs running in it), for the table."""
    hours: dict[int, list[samples.Point]] = {}
    for point, (_, at) in zip(points, places, strict=True):
        hours.setdefault(int(at // 3600), []).append(point)
    rows = []
    for number, group in hours.items():
        hour = timezone.localtime(datetime.fromtimestamp(number * 3600, tz=UTC))
        cpus = [p.cpu_percent for p in group if p.cpu_percent is not None]
        rows.append(
            {
                "hour": hour,
                "cpu": f"{sum(cpus) / len(cpus):.0f}%" if cpus else "—",
                "given": round(sum(p.memory_given_mb for p in group) / len(group)),
                "used": round(sum(p.memory_used_mb for p in group) / len(group)),
                "vms": max(p.vms_running for p in group),
            }
        )
    return rows


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
    start = now - samples.MINUTES_KEPT
    charts = charts_for(host, points)
    at = places(points, start)
    return render_to_string(
        "admin/hosts/host/day_charts.html",
        {
            "host": host,
            "charts": [{"chart": c, "svg": svg(c, points, at, start)} for c in charts],
            "hours": _hourly(points, at),
            "points": len(points),
        },
    )
