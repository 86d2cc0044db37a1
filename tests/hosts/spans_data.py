"""A month of points for the charts' spans (``hosts.spans``): hourly points over thirty days
but none on one day, and a point a minute over the last day, as the pruning leaves them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hosts import samples
from hosts.charts import LEFT, WIDTH

NOW = datetime(2027, 1, 13, 10, 30, tzinfo=UTC)  # a Wednesday; the tests run in UTC
NO_POINTS_ON = date(2027, 1, 10)  # a Sunday, in the last week


def a_month_of(kept: samples.Kept, hourly: dict, minutely: dict, now=NOW, **owner) -> None:
    """``kept``'s points of the owner: ``hourly`` figures each hour of the thirty days before
    ``now`` (a whole minute) up to the hour the day's start falls in (whose minutes wait for
    the pruning), none on ``NO_POINTS_ON``, and ``minutely`` figures each minute of the last
    day."""
    day_start = now - timedelta(minutes=24 * 60 - 1)
    hours = (day_start.replace(minute=0) - timedelta(hours=h) for h in range(1, 30 * 24))
    kept.hours.objects.bulk_create(
        kept.hours(at=at, **owner, **hourly)
        for at in hours
        if at > now - samples.HOURS_KEPT and at.date() != NO_POINTS_ON
    )
    kept.minutes.objects.bulk_create(
        kept.minutes(at=now - timedelta(minutes=m), **owner, **minutely) for m in range(24 * 60)
    )


def x_of(at: datetime, days: int) -> str:
    """Where a chart of the last ``days`` before ``NOW`` draws the moment ``at``."""
    start = NOW - timedelta(days=days)
    return f"{LEFT + (WIDTH - LEFT) * (at - start) / timedelta(days=days):.1f}"
