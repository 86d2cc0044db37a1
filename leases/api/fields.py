"""Lease input in Blazar's spellings: times, durations, host properties and affinity."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from leases import properties
from project import json_input, times

TIME_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")


def parse_time(value, field: str) -> datetime:
    """Blazar's times: "now", "2017-05-17 09:07" (UTC), or ISO 8601 with a zone; in UTC."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value.strip():
        raise serializers.ValidationError({field: "A date and time is required."})
    text = value.strip()
    if text == "now":
        return timezone.now()
    for fmt in TIME_FORMATS:
        try:
            parsed = datetime.strptime(text, fmt).replace(tzinfo=UTC)
            break
        except ValueError:
            continue
    else:
        try:
            parsed = parse_datetime(text)
        except ValueError:  # well formed but no such time (February 30)
            parsed = None
    if parsed is None:
        raise serializers.ValidationError(
            {field: "Use 'now', 'YYYY-MM-DD HH:MM' (UTC) or an ISO 8601 time."}
        )
    try:
        return times.as_stored(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))
    except DjangoValidationError as exc:
        raise serializers.ValidationError({field: exc.messages}) from None


def parse_properties(value, field: str) -> dict:
    """Host properties: a map of values or of operators ({"cpus": 16, "gpu": "a100", "zone":
    {"in": ["a", "b"]}}), or Blazar's expression ('["and", [">=", "$vcpus", "16"], ["!=",
    "$gpu", "t4"]]', as text or as JSON), in their stored form (leases/properties.py).
    ``cpus`` and ``memory_mb`` take whole numbers. Nothing (``""``, ``[]``, ``"[]"``, ``{}``)
    is no constraint, as in Blazar."""
    if value in (None, "", {}, []):
        return {}
    try:
        if isinstance(value, dict):
            return properties.normalized(dict(value))
        parsed = json_input.loads(value) if isinstance(value, str) else value
        if parsed == []:
            return {}
        found = properties.from_expression(parsed)
        return properties.normalized(
            {name: properties.canonical(name, ops) for name, ops in found.items()}
        )
    except ValueError as exc:  # not JSON
        raise serializers.ValidationError({field: str(exc)}) from None
    except DjangoValidationError as exc:
        raise serializers.ValidationError({field: exc.messages}) from None


TIME_HELP = "'now', 'YYYY-MM-DD HH:MM' (UTC) or an ISO 8601 time."
PROPERTIES_HELP = (
    'Host properties: an object ({"cpus": 16, "zone": {"in": ["a", "b"]}}) or Blazar\'s'
    ' expression, as a list or its JSON text (\'["and", [">=", "$vcpus", "16"], ["==", "$gpu",'
    ' "a100"]]\'); operators ==, !=, <, <=, >, >=, in.'
)


@extend_schema_field(
    {
        "anyOf": [
            {"type": "object", "additionalProperties": {}},
            {"type": "array", "items": {}},
            {"type": "string"},
        ],
    }
)
class HostPropertiesField(serializers.JSONField):
    """Host properties as parse_properties() reads them."""


def refuse_unknown(serializer: serializers.Serializer, data) -> None:
    """A field the API does not apply is a 400 naming it, never a silent no-op."""
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(serializer.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: ["Unknown field; Corral does not apply it."] for name in unknown}
            )


@extend_schema_field(
    {
        "oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["True", "False", "None"]}],
        "nullable": True,
    }
)
class AffinityField(serializers.Field):
    """true (one host), false (distinct hosts) or null (any); Blazar's client sends the
    strings "True", "False" and "None"."""

    WORDS = {"true": True, "false": False, "none": None, "null": None, "": None}
    default_error_messages = {"invalid": "Use true (one host), false (distinct hosts) or null."}

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data.strip().lower() in self.WORDS:
            return self.WORDS[data.strip().lower()]
        self.fail("invalid")

    def to_representation(self, value):
        return value


ELAPSED = re.compile(r"^(\d{1,6})([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_elapsed(value, field: str) -> timedelta:
    """Blazar's durations: a number and a unit, "30m", "12h", "2d"."""
    match = ELAPSED.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise serializers.ValidationError({field: 'A duration such as "30m", "12h" or "2d".'})
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})
