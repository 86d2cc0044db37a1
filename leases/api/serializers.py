"""Leases in Blazar's words: request bodies accepted verbatim, answers with Blazar's fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.contrib.auth.models import Group
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from leases.models import EndAction, Lease, Reservation, ResourceType

TIME_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")
# Later times cannot be shown in every time zone (Python's calendar ends with 9999).
LAST_YEAR = 9998
TOO_LATE = f"Pick a time before the year {LAST_YEAR + 1}."


def parse_time(value, field: str) -> datetime:
    """Blazar's times: "now", "2017-05-17 09:07" (UTC), or ISO 8601 with a zone."""
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
    if parsed.year > LAST_YEAR:
        raise serializers.ValidationError({field: TOO_LATE})
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


PROPERTY_NAMES = {"$vcpus": "cpus", "$cpus": "cpus", "$memory_mb": "memory_mb"}


def parse_properties(value, field: str) -> dict:
    """Host properties: a dict ({"cpus": 16}), or Blazar's expression string
    ('["and", [">=", "$vcpus", "16"], ["==", "$gpu", "a100"]]')."""
    if value in (None, "", {}):
        return {}
    if isinstance(value, dict):
        return value
    try:
        expression = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        raise serializers.ValidationError({field: "Not valid JSON."}) from None
    properties: dict = {}

    def walk(node):
        if not isinstance(node, list) or not node:
            raise serializers.ValidationError({field: "Expected [op, $name, value]."})
        op = node[0]
        if op == "and":
            for part in node[1:]:
                walk(part)
            return
        if op not in ("==", ">=") or len(node) != 3 or not str(node[1]).startswith("$"):
            raise serializers.ValidationError(
                {field: f"Unsupported expression {node!r}: use ==, >= and and."}
            )
        name = PROPERTY_NAMES.get(node[1], node[1][1:])
        if name in ("cpus", "memory_mb"):
            try:
                properties[name] = int(node[2])
            except ValueError:
                raise serializers.ValidationError({field: f"{node[1]} needs a number."}) from None
        else:
            properties[name] = node[2]

    walk(expression)
    return properties


TIME_HELP = "'now', 'YYYY-MM-DD HH:MM' (UTC) or an ISO 8601 time."
PROPERTIES_HELP = (
    'Host properties: an object ({"cpus": 16}) or Blazar\'s expression, as a list or its JSON'
    ' text (\'["and", [">=", "$vcpus", "16"], ["==", "$gpu", "a100"]]\').'
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


class ReservationRequestSerializer(serializers.Serializer):
    """One reservation of a lease: instances of a size (virtual:instance: vcpus, memory_mb and
    amount), or whole hosts (physical:host: min, and max)."""

    # Which fields each kind of reservation needs, for the schema (validate() checks them). A
    # pattern, not an enum: drf-spectacular would take a one-value enum for a choice set.
    schema_constraints = {
        "oneOf": [
            {
                "properties": {"resource_type": {"pattern": f"^{ResourceType.INSTANCE}$"}},
                "required": ["vcpus", "memory_mb", "amount"],
            },
            {
                "properties": {"resource_type": {"pattern": f"^{ResourceType.HOST}$"}},
                "required": ["min"],
            },
        ]
    }

    resource_type = serializers.ChoiceField(choices=ResourceType.choices)
    vcpus = serializers.IntegerField(required=False, min_value=1, max_value=512)
    memory_mb = serializers.IntegerField(required=False, min_value=16, max_value=16 * 1024**2)
    disk_gb = serializers.IntegerField(required=False, min_value=0, max_value=64 * 1024, default=0)
    amount = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    affinity = serializers.BooleanField(required=False, allow_null=True, default=None)
    min = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    max = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    host_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)
    resource_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)
    hypervisor_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)

    def validate(self, attrs):
        errors = {}
        if attrs["resource_type"] == ResourceType.INSTANCE:
            for name in ("vcpus", "memory_mb", "amount"):
                if attrs.get(name) is None:
                    errors[name] = "Required for virtual:instance."
        else:
            if attrs.get("min") is None:
                errors["min"] = "Required for physical:host."
            attrs.setdefault("max", attrs.get("min"))
            if attrs.get("min") and attrs.get("max") and attrs["max"] < attrs["min"]:
                errors["max"] = "At least min."
        if errors:
            raise serializers.ValidationError(errors)
        properties = {}
        for name in ("hypervisor_properties", "resource_properties", "host_properties"):
            properties.update(parse_properties(attrs.pop(name, None), name))
        attrs["host_properties"] = properties
        return attrs


class LeaseRequestSerializer(serializers.Serializer):
    """Blazar's body: name, start or start_date, end or end_date, before_end(_date),
    reservations."""

    # Blazar's two spellings of the start and of the end: one of each is required.
    schema_constraints = {
        "allOf": [
            {"anyOf": [{"required": ["start"]}, {"required": ["start_date"]}]},
            {"anyOf": [{"required": ["end"]}, {"required": ["end_date"]}]},
        ]
    }

    name = serializers.CharField(max_length=80)
    start = serializers.CharField(required=False, help_text=TIME_HELP)
    start_date = serializers.CharField(required=False, help_text=TIME_HELP)
    end = serializers.CharField(required=False, help_text=TIME_HELP)
    end_date = serializers.CharField(required=False, help_text=TIME_HELP)
    before_end = serializers.CharField(required=False, allow_null=True, help_text=TIME_HELP)
    before_end_date = serializers.CharField(required=False, allow_null=True, help_text=TIME_HELP)
    reservations = ReservationRequestSerializer(many=True, allow_empty=False)
    events = serializers.ListField(required=False, help_text="Accepted for Blazar; ignored.")
    end_action = serializers.ChoiceField(choices=EndAction.choices, default=EndAction.STOP)
    group = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=150,
        help_text="A group of yours whose members share the lease (by name).",
    )

    def validate_group(self, value) -> Group | None:
        if not value:
            return None
        user = self.context["request"].user
        group = Group.objects.filter(name=value, user=user).first()
        if group is None:
            raise serializers.ValidationError(f"You are not a member of a group named {value!r}.")
        return group

    def validate(self, attrs):
        start = attrs.pop("start", None) or attrs.pop("start_date", None)
        end = attrs.pop("end", None) or attrs.pop("end_date", None)
        attrs.pop("start_date", None)
        attrs.pop("end_date", None)
        errors = {}
        if start is None:
            errors["start_date"] = "Required (or 'start'); 'now' starts the lease at once."
        if end is None:
            errors["end_date"] = "Required (or 'end')."
        if errors:
            raise serializers.ValidationError(errors)
        attrs["start"] = parse_time(start, "start_date")
        attrs["end"] = parse_time(end, "end_date")
        before = attrs.pop("before_end", None) or attrs.pop("before_end_date", None)
        attrs.pop("before_end_date", None)
        attrs["before_end"] = parse_time(before, "before_end_date") if before else None
        if attrs["end"] <= attrs["start"]:
            raise serializers.ValidationError({"end_date": "The lease must end after it starts."})
        if attrs["end"] <= timezone.now():
            raise serializers.ValidationError({"end_date": "The lease must end in the future."})
        if attrs["before_end"] and not attrs["start"] <= attrs["before_end"] <= attrs["end"]:
            raise serializers.ValidationError(
                {"before_end_date": "Between the start and the end of the lease."}
            )
        attrs.pop("events", None)
        return attrs


class ReservationChangeSerializer(serializers.Serializer):
    """A reservation's new amount, in a lease update."""

    id = serializers.IntegerField()
    amount = serializers.IntegerField(min_value=1)


@extend_schema_field(ReservationChangeSerializer(many=True))
class ReservationChangesField(serializers.ListField):
    """Reservation changes, read by LeaseUpdateSerializer.validate()."""


class LeaseUpdateSerializer(serializers.Serializer):
    """Blazar's update: a new name, start, end, or amounts of reservations."""

    name = serializers.CharField(max_length=80, required=False)
    start = serializers.CharField(required=False, help_text=TIME_HELP)
    start_date = serializers.CharField(required=False, help_text=TIME_HELP)
    end = serializers.CharField(required=False, help_text=TIME_HELP)
    end_date = serializers.CharField(required=False, help_text=TIME_HELP)
    reservations = ReservationChangesField(child=serializers.DictField(), required=False)

    def validate(self, attrs):
        changes = {}
        if "name" in attrs:
            changes["name"] = attrs["name"]
        start = attrs.get("start") or attrs.get("start_date")
        end = attrs.get("end") or attrs.get("end_date")
        if start:
            changes["start"] = parse_time(start, "start_date")
        if end:
            changes["end"] = parse_time(end, "end_date")
            if changes["end"] <= timezone.now():
                raise serializers.ValidationError({"end_date": "The lease must end in the future."})
        amounts = {}
        for item in attrs.get("reservations", []):
            try:
                amounts[int(item["id"])] = int(item["amount"])
            except (KeyError, TypeError, ValueError):
                raise serializers.ValidationError(
                    {"reservations": 'Each change is {"id": <reservation id>, "amount": n}.'}
                ) from None
            if amounts[int(item["id"])] < 1:
                raise serializers.ValidationError({"reservations": "An amount is at least 1."})
        if amounts:
            changes["amounts"] = amounts
        return changes


class AllocationSerializer(serializers.Serializer):
    host = serializers.IntegerField(source="host_id")
    host_name = serializers.CharField(source="host.name")
    slots = serializers.IntegerField()
    whole_host = serializers.BooleanField()


class ReservationSerializer(serializers.ModelSerializer):
    lease_id = serializers.IntegerField(read_only=True)
    allocations = AllocationSerializer(many=True, read_only=True)
    launched = serializers.SerializerMethodField()

    class Meta:
        model = Reservation
        fields = [
            "id",
            "lease_id",
            "status",
            "resource_type",
            "vcpus",
            "memory_mb",
            "disk_gb",
            "amount",
            "affinity",
            "min",
            "max",
            "host_properties",
            "allocations",
            "launched",
            "created_at",
            "updated_at",
        ]

    def get_launched(self, reservation) -> int:
        return len(reservation.vms.all())


class LeaseSerializer(serializers.ModelSerializer):
    user_id = serializers.IntegerField(source="owner_id", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    group = serializers.CharField(source="group.name", read_only=True, allow_null=True)
    reservations = ReservationSerializer(many=True, read_only=True)
    events = serializers.SerializerMethodField()

    class Meta:
        model = Lease
        fields = [
            "id",
            "name",
            "user_id",
            "owner",
            "group",
            "start_date",
            "end_date",
            "before_end_date",
            "status",
            "degraded",
            "end_action",
            "reservations",
            "events",
            "created_at",
            "updated_at",
        ]

    def get_events(self, lease) -> list[dict]:
        return [
            {"event_type": e.event_type, "time": e.time, "status": e.status}
            for e in lease.events.all()
        ]


class CapacityAnswerSerializer(serializers.Serializer):
    fits = serializers.BooleanField()
    message = serializers.CharField()
