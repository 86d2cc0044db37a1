"""The portal's timeline of a user's leases: each lease a bar over time, laid out for an
inline SVG.

The axis runs from the earliest start to the latest end of the leases shown, with date ticks
at round instants of the current time zone; bars are coloured by the lease's status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from leases.models import Lease, LeaseStatus

WIDTH = 960
LABEL_WIDTH = 180
RIGHT_MARGIN = 16
AXIS_HEIGHT = 28
ROW_HEIGHT = 26
BAR_HEIGHT = 16
MIN_BAR_WIDTH = 3
MOST_TICKS = 8
LABEL_CHARS = 24

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
TICK_STEPS = [
    HOUR,
    2 * HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    2 * DAY,
    7 * DAY,
    14 * DAY,
    30 * DAY,
    91 * DAY,
    365 * DAY,
]

STATUS_COLOURS = {
    LeaseStatus.PENDING: "#1f6feb",
    LeaseStatus.ACTIVE: "#1a7f37",
    LeaseStatus.TERMINATED: "#8c959f",
    LeaseStatus.ERROR: "#cf222e",
}
OTHER_COLOUR = "#8c959f"


@dataclass
class Bar:
    lease: Lease
    label: str
    x: float
    y: float
    width: float
    colour: str
    label_y: float


@dataclass
class Tick:
    x: float
    label: str


@dataclass
class Timeline:
    width: int
    height: int
    plot_left: int
    plot_right: int
    label_x: int
    bars: list[Bar]
    ticks: list[Tick]
    now_x: float | None
    legend: list[tuple[str, str]]


def _step_for(span: timedelta) -> timedelta:
    for step in TICK_STEPS:
        if span / step <= MOST_TICKS:
            return step
    return TICK_STEPS[-1] * (span // (TICK_STEPS[-1] * MOST_TICKS) + 1)


def _first_tick(start: datetime, step: timedelta) -> datetime:
    """The first round instant (local) at or after ``start`` for ticks ``step`` apart."""
    local = timezone.localtime(start)
    if step < DAY:
        hours = int(step / HOUR)
        tick = local.replace(minute=0, second=0, microsecond=0)
        tick = tick.replace(hour=tick.hour - tick.hour % hours)
    else:
        tick = local.replace(hour=0, minute=0, second=0, microsecond=0)
    while tick < start:
        tick += step
    return tick


def _tick_label(tick: datetime, step: timedelta) -> str:
    if step >= 91 * DAY:
        return tick.strftime("%Y-%m-%d")
    if step >= DAY or (tick.hour == 0 and tick.minute == 0):
        return tick.strftime("%b %d")
    return tick.strftime("%H:%M")


def _short(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"


def build(leases: Sequence[Lease], now: datetime | None = None) -> Timeline | None:
    """The timeline of ``leases``, one row each in their order (None when there are none)."""
    if not leases:
        return None
    now = now or timezone.now()
    first = min(lease.start_date for lease in leases).astimezone(UTC)
    last = max(lease.end_date for lease in leases).astimezone(UTC)
    span = max(last - first, timedelta(minutes=1))
    left, right = LABEL_WIDTH, WIDTH - RIGHT_MARGIN

    def x_of(moment: datetime) -> float:
        return round(left + (moment.astimezone(UTC) - first) / span * (right - left), 1)

    bars = []
    for row, lease in enumerate(leases):
        x = x_of(lease.start_date)
        y = AXIS_HEIGHT + row * ROW_HEIGHT + (ROW_HEIGHT - BAR_HEIGHT) / 2
        bars.append(
            Bar(
                lease=lease,
                label=_short(lease.name),
                x=x,
                y=y,
                width=max(MIN_BAR_WIDTH, round(x_of(lease.end_date) - x, 1)),
                colour=STATUS_COLOURS.get(lease.status, OTHER_COLOUR),
                label_y=y + BAR_HEIGHT - 3,
            )
        )
    step = _step_for(span)
    ticks = []
    tick = _first_tick(first, step)
    while tick <= last:
        ticks.append(Tick(x=x_of(tick), label=_tick_label(tick, step)))
        try:
            tick += step
        except OverflowError:  # the calendar ends before the next tick
            break
    order = list(STATUS_COLOURS)
    statuses = {lease.status for lease in leases if lease.status in STATUS_COLOURS}
    shown = sorted(statuses, key=order.index)
    return Timeline(
        width=WIDTH,
        height=AXIS_HEIGHT + len(leases) * ROW_HEIGHT + 4,
        plot_left=left,
        plot_right=right,
        label_x=left - 8,
        bars=bars,
        ticks=ticks,
        now_x=x_of(now) if first <= now <= last else None,
        legend=[(LeaseStatus(status).label, STATUS_COLOURS[status]) for status in shown],
    )
