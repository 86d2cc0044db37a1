"""How far back a set of charts looks (the last day, week or month, as Proxmox offers), for
every page that draws them: what each span reads and how it draws it, the span a page or a
fragment asks for (``?span=week``), and the picker above the charts
(``hosts/_span_charts.html``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.http import HttpResponse, HttpResponseBadRequest
from django.utils import timezone

from hosts.samples import HOURS_KEPT, MINUTES_KEPT


@dataclass(frozen=True)
class Span:
    """One span: its minute points (``hourly`` False), or one point an hour (the hourly points
    and the last day's minutes averaged per hour), drawn with the x axis's labels ``tick``
    apart and the text table one row an hour (a day for ``hourly``)."""

    key: str  # in the query: ?span=week
    label: str  # the picker's
    words: str  # in titles and sentences
    length: timedelta
    hourly: bool
    tick: timedelta
    tick_format: str  # a label of the x axis (Django's date format)
    when_format: str  # the moment of a highest value in the summaries

    @property
    def gap(self) -> timedelta:
        """No point for longer than this: the line breaks (one missing point does not)."""
        return timedelta(hours=2) if self.hourly else timedelta(minutes=2)

    @property
    def row(self) -> str:
        return "day" if self.hourly else "hour"

    def ticks(self, start: datetime) -> list[datetime]:
        """Where the x axis is labelled: every ``tick`` from ``start`` for the day, at local
        midnights for longer spans."""
        if not self.hourly:
            return [start + self.tick * n for n in range(int(self.length / self.tick) + 1)]
        midnight = timezone.localtime(start).replace(hour=0, minute=0, second=0, microsecond=0)
        days = range(1, self.length.days + 1, self.tick.days)
        return [midnight + timedelta(days=n) for n in days]


DAY = Span(
    "day", "Last day", "last 24 hours", MINUTES_KEPT, hourly=False,
    tick=timedelta(hours=6), tick_format="H:i", when_format="H:i",
)  # fmt: skip
WEEK = Span(
    "week", "Last week", "last 7 days", timedelta(days=7), hourly=True,
    tick=timedelta(days=1), tick_format="D j", when_format="D j M, H:i",
)  # fmt: skip
MONTH = Span(
    "month", "Last month", "last 30 days", HOURS_KEPT, hourly=True,
    tick=timedelta(days=5), tick_format="j M", when_format="D j M, H:i",
)  # fmt: skip
SPANS = {span.key: span for span in (DAY, WEEK, MONTH)}
UNKNOWN = "Unknown span: ask for span=day, span=week or span=month."


def on_page(request) -> Span:
    """The span a page's query asks for, the day for none or one it does not know."""
    return SPANS.get(request.GET.get("span", ""), DAY)


def fragment(request, draw: Callable[[Span], str]) -> HttpResponse:
    """The charts alone (``draw(span)``) over the span the query asks for, the day for none;
    a 400 with a plain message for a span it does not know."""
    span = SPANS.get(request.GET.get("span", DAY.key))
    if span is None:
        return HttpResponseBadRequest(UNKNOWN, content_type="text/plain; charset=utf-8")
    return HttpResponse(draw(span))


def box(key: str, url: str, span: Span, charts: str) -> dict:
    """What ``hosts/_span_charts.html`` reads: the picker of spans, and the box of ``charts``
    (``<key>-day-charts``) that reads them again every minute from ``url`` (the fragment)."""
    return {
        "id": f"{key}-day-charts",
        "url": url,
        "span": span,
        "spans": SPANS.values(),
        "charts": charts,
    }
