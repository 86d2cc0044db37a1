"""Blazar's request bodies, read and checked in Blazar's order and words.

A lease request: Blazar's own checks (its manager's ``create_lease`` and ``update_lease``, its
host plugin's reservation checks). They run before Corral's validation
(``leases/api/serializers.py``), which then applies what Blazar does not check; Corral's extras
(``start``/``end``, moves by a duration, added reservations, Corral's property operators) are
left to it. A host body: the extra capabilities it carries.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from django.utils import timezone
from rest_framework import serializers

from leases.models import Lease, ResourceType
from openstack.blazar.base import (
    LEASE_DATE_FORMAT,
    BlazarError,
    invalid_date,
    invalid_input,
    malformed_parameter,
    malformed_requirements,
    missing_parameter,
)
from openstack.blazar.presenters import HOST_KEYS
from project import json_input

# Blazar's parameter -> the spellings Corral takes for it.
DATES = {"start_date": ("start_date", "start"), "end_date": ("end_date", "end")}
BEFORE_END = ("before_end_date", "before_end")


def _given(body: dict, names) -> object | None:
    return next((body[name] for name in names if body.get(name) is not None), None)


def blazar_now() -> datetime:
    """Now to the minute, as Blazar compares dates with it."""
    return timezone.now().replace(second=0, microsecond=0)


def parse_date(value, now: datetime) -> datetime:
    """ "now" or ``%Y-%m-%d %H:%M`` (UTC): the only dates Blazar takes."""
    if value == "now":
        return now
    try:
        return datetime.strptime(value, LEASE_DATE_FORMAT).replace(tzinfo=UTC)
    except (TypeError, ValueError):
        raise invalid_date(value) from None


def _out_of_lease_limits() -> BlazarError:
    # Blazar's NotAuthorized, hence a 403.
    return BlazarError(403, "Datetime is out of lease limits")


def check_before_end(body: dict, start: datetime, end: datetime) -> datetime | None:
    """A ``before_end_date``, when given, strictly inside the lease's window; the date."""
    value = _given(body, BEFORE_END)
    if not value:
        return None
    if value == "now":
        raise invalid_date(value)
    before_end = parse_date(value, start)
    if not start < before_end < end:
        raise _out_of_lease_limits()
    return before_end


def check_create(body: dict) -> tuple[datetime, datetime]:
    """Blazar's checks of a new lease up to its reservations: the parameters it needs, its
    dates' format, a start not in the past and an end after the start. The dates."""
    missing = [
        param
        for param, names in (("name", ("name",)), *DATES.items())
        if _given(body, names) is None
    ]
    if missing:
        raise missing_parameter(", ".join(missing))
    reservations = body.get("reservations") or []
    for reservation in reservations if isinstance(reservations, list) else []:
        if isinstance(reservation, dict) and "resource_type" not in reservation:
            raise missing_parameter("resource_type")
    now = blazar_now()
    start = parse_date(_given(body, DATES["start_date"]), now)
    end = parse_date(_given(body, DATES["end_date"]), now)
    if start < now:
        raise invalid_input("Start date must be later than current date")
    if end <= start:
        raise invalid_input("End date must be later than start date.")
    for reservation in reservations if isinstance(reservations, list) else []:
        if isinstance(reservation, dict):
            check_reservation(reservation)
    return start, end


def check_update(lease: Lease, body: dict) -> None:
    """Blazar's checks of a lease change: its dates (a started lease keeps its start, a
    pending one may not start in the past, an ended one may only be renamed, the end after
    now and the start), then ``before_end_date``, then the reservations' ids."""
    if not body or set(body) == {"name"}:
        return
    now = blazar_now()
    given = {param: _given(body, names) for param, names in DATES.items()}
    start = lease.start_date.replace(second=0, microsecond=0)
    end = lease.end_date.replace(second=0, microsecond=0)
    if given["start_date"] is not None:
        start = parse_date(given["start_date"], now)
    if given["end_date"] is not None:
        end = parse_date(given["end_date"], now)
    if lease.start_date < now and start != lease.start_date.replace(second=0, microsecond=0):
        raise invalid_input("Cannot modify the start date of already started leases")
    if lease.start_date > now and start < now:
        raise invalid_input("Start date must be later than current date")
    if lease.end_date < now:
        raise invalid_input("Terminated leases can only be renamed")
    if end < now or end < start:
        raise invalid_input("End date must be later than current and start date")
    check_before_end(body, start, end)
    items = body.get("reservations") or []
    items = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    if any(item.get("id") in (None, "") and not item.get("resource_type") for item in items):
        raise missing_parameter("reservation ID")
    held = {str(pk) for pk in lease.reservations.values_list("pk", flat=True)}
    unknown = [str(item["id"]) for item in items if item.get("id") not in (None, "")]
    unknown = [ident for ident in dict.fromkeys(unknown) if ident not in held]
    if unknown:
        raise invalid_input(
            "Please enter valid reservation IDs. Invalid reservation IDs are: " + ",".join(unknown)
        )
    for item in items:
        check_reservation(item)


def _int_like(value) -> bool:
    return not isinstance(value, bool) and str(value).lstrip("-").isdigit()


def check_reservation(reservation: dict) -> None:
    """What Blazar's plugins check of a reservation's values: a host reservation's ``min``
    and ``max``, and property expressions that are JSON."""
    if reservation.get("resource_type") == ResourceType.HOST and "id" not in reservation:
        minimum, maximum = reservation.get("min"), reservation.get("max")
        if minimum in (None, ""):
            raise missing_parameter("min")
        for name, value in (("min", minimum), ("max", maximum)):
            if value not in (None, "") and not _int_like(value):
                raise malformed_parameter(name)
        if maximum in (None, ""):
            maximum = minimum  # Corral's default: exactly min hosts
        if int(minimum) <= 0 or int(maximum) <= 0:
            raise malformed_parameter("min and max (must be greater than or equal to 1)")
        if int(maximum) < int(minimum):
            raise BlazarError(
                400,
                "Invalid values for min/max of hosts. Max must be equal to or larger than min.",
            )
    for name in ("hypervisor_properties", "resource_properties"):
        value = reservation.get(name)
        if isinstance(value, str) and value.strip():
            try:
                json_input.loads(value)
            except json_input.NotJSON:
                raise malformed_requirements(value) from None
            except json_input.OutOfLimits as exc:
                raise BlazarError(400, f"{name}: {exc}") from None


CAPABILITY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")


def capabilities_of(values: dict, *, removals: bool) -> dict:
    """Extra capabilities from a host body: names up to 64 letters, digits and ``_.:-``,
    plain values (text up to 255 characters, numbers, booleans; None removes one when
    ``removals``). A name over 64 characters is Blazar's ExtraCapabilityTooLong, before any
    other check."""
    if any(len(key) > 64 for key in values):
        raise BlazarError(400, "Extra capability key too long")
    errors = {}
    for key, value in values.items():
        if key in HOST_KEYS:
            errors[key] = "A field of the host itself, not an extra capability."
        elif not CAPABILITY_NAME.match(key):
            errors[key[:80]] = "A capability name is up to 64 letters, digits and _.:- ."
        elif value is None and removals:
            continue
        elif isinstance(value, str) and len(value) > 255:
            errors[key] = "At most 255 characters."
        elif isinstance(value, str) and "\x00" in value:
            errors[key] = "Null characters are not allowed."
        elif not isinstance(value, str | int | float | bool) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            errors[key] = "A capability is text, a number or true/false."
    if errors:
        raise serializers.ValidationError(errors)
    return dict(values)
