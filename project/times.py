"""Times that come in from outside (API bodies, portal forms), made fit to store and show.

Every date and time a person or a client types goes through ``as_stored()``: it must fall
before the year 9999 where it was typed, so that every time zone can show it (Python's calendar
ends with 9999), and it becomes UTC, so an offset Python accepts but PostgreSQL refuses (beyond
±15:59, such as ``+23:00``) names the same instant instead of failing in the database.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.exceptions import ValidationError

LAST_YEAR = 9998
TOO_LATE = f"Pick a time before the year {LAST_YEAR + 1}."
TOO_EARLY = "No such time: it falls before the year 1 in UTC."


def as_stored(moment: datetime) -> datetime:
    """``moment`` (aware) in UTC; a ValidationError when it cannot be stored and shown."""
    if moment.year > LAST_YEAR:
        raise ValidationError(TOO_LATE, code="too_late")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # early on January 1st of year 1, with an offset east of UTC
        raise ValidationError(TOO_EARLY, code="too_early") from None
