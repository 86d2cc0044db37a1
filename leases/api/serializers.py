"""Leases in Blazar's words: request bodies accepted verbatim, answers with Blazar's fields."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.utils import timezone
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from leases.api.fields import (
    PROPERTIES_HELP,
    TIME_HELP,
    AffinityField,
    HostPropertiesField,
    parse_elapsed,
    parse_properties,
    parse_time,
    refuse_unknown,
)
from leases.models import EndAction, Lease, Reservation, ResourceType

INSTANCE_ONLY = ("vcpus", "memory_mb", "disk_gb", "amount", "affinity")
HOST_ONLY = ("min", "max", "before_end")
PROPERTY_FIELDS = ("hypervisor_properties", "resource_properties", "host_properties")


def _without_blanks(data):
    """Blazar's client sends "" for every option left out: no value, not a bad one."""
    if not isinstance(data, dict):
        return data
    return {key: value for key, value in data.items() if value != ""}


def _check_before_end(attrs: dict) -> None:
    # Blazar's host reservations may ask for an action before the end; Corral only warns.
    action = attrs.pop("before_end", None)
    if action not in (None, "default"):
        raise serializers.ValidationError(
            {"before_end": "Only 'default' (warn the owner) is supported."}
        )


def _refuse_other_kind(attrs: dict, kind: str) -> None:
    other = HOST_ONLY if kind == ResourceType.INSTANCE else INSTANCE_ONLY
    given = [name for name in other if attrs.get(name) is not None]
    if given:
        raise serializers.ValidationError(
            {name: f"Not a field of {kind} reservations." for name in given}
        )


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
    disk_gb = serializers.IntegerField(required=False, min_value=0, max_value=64 * 1024)
    amount = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    affinity = AffinityField(required=False, default=None)
    min = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    max = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    before_end = serializers.CharField(required=False, allow_null=True)
    host_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)
    resource_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)
    hypervisor_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)

    def to_internal_value(self, data):
        data = _without_blanks(data)
        refuse_unknown(self, data)
        return super().to_internal_value(data)

    def validate(self, attrs):
        errors = {}
        kind = attrs["resource_type"]
        _refuse_other_kind(attrs, kind)
        if kind == ResourceType.INSTANCE:
            attrs.setdefault("disk_gb", 0)
            for name in ("vcpus", "memory_mb", "amount"):
                if attrs.get(name) is None:
                    errors[name] = "Required for virtual:instance."
        else:
            _check_before_end(attrs)
            attrs.pop("affinity", None)
            if attrs.get("min") is None:
                errors["min"] = "Required for physical:host."
            attrs.setdefault("max", attrs.get("min"))
            if attrs.get("min") and attrs.get("max") and attrs["max"] < attrs["min"]:
                errors["max"] = "At least min."
        if errors:
            raise serializers.ValidationError(errors)
        asked = {}
        for name in PROPERTY_FIELDS:
            asked.update(parse_properties(attrs.pop(name, None), name))
        attrs["host_properties"] = asked
        return attrs


class ReservationChangeSerializer(serializers.Serializer):
    """A change to one reservation of a lease (``id``); what is left out stays as it is."""

    id = serializers.IntegerField(min_value=1)
    resource_type = serializers.ChoiceField(choices=ResourceType.choices, required=False)
    vcpus = serializers.IntegerField(required=False, min_value=1, max_value=512)
    memory_mb = serializers.IntegerField(required=False, min_value=16, max_value=16 * 1024**2)
    disk_gb = serializers.IntegerField(required=False, min_value=0, max_value=64 * 1024)
    amount = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    affinity = AffinityField(required=False)
    min = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    max = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    before_end = serializers.CharField(required=False, allow_null=True)
    host_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)
    resource_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)
    hypervisor_properties = HostPropertiesField(required=False, help_text=PROPERTIES_HELP)

    def to_internal_value(self, data):
        data = _without_blanks(data)
        refuse_unknown(self, data)
        return super().to_internal_value(data)

    def validate(self, attrs):
        _check_before_end(attrs)
        if len(attrs) == 1:
            raise serializers.ValidationError(
                {"reservations": f"Nothing to change in reservation {attrs['id']}."}
            )
        for name in PROPERTY_FIELDS:
            if name in attrs:
                attrs[name] = parse_properties(attrs[name], name)
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
    reservations = ReservationRequestSerializer(
        many=True,
        required=False,
        help_text="Left out or empty: a lease that reserves nothing, as Blazar accepts one; it "
        "holds no capacity and still has its window, its events and its status.",
    )
    events = serializers.ListField(
        required=False, help_text="Blazar's custom events: none are supported (an empty list)."
    )
    end_action = serializers.ChoiceField(choices=EndAction.choices, default=EndAction.STOP)
    group = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=150,
        help_text="A group of yours whose members share the lease (by name).",
    )

    def to_internal_value(self, data):
        refuse_unknown(self, data)
        return super().to_internal_value(data)

    def validate_events(self, value):
        if value:
            raise serializers.ValidationError(
                "Custom events are not supported; Corral schedules the start, the warning "
                "before the end and the end itself."
            )
        return value

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
        attrs.setdefault("reservations", [])
        return attrs


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="ReservationItem",
        serializers=[ReservationChangeSerializer, ReservationRequestSerializer],
        resource_type_field_name=None,
        many=True,
    )
)
class ReservationItemsField(serializers.ListField):
    """A lease update's reservations: changes of existing ones (with their ``id``) and new
    ones; read by LeaseUpdateSerializer.validate()."""


# Relative moves of the lease's dates: field -> (which date, direction).
SHIFTS = {
    "prolong_for": ("end", 1),
    "reduce_by": ("end", -1),
    "defer_by": ("start", 1),
    "advance_by": ("start", -1),
}


class LeaseUpdateSerializer(serializers.Serializer):
    """A change to a lease: name, dates (or moves of them), the warning time, and changed or
    added reservations (an item with an ``id`` changes that reservation; one without is a
    new reservation)."""

    name = serializers.CharField(max_length=80, required=False)
    start = serializers.CharField(required=False, help_text=TIME_HELP)
    start_date = serializers.CharField(required=False, help_text=TIME_HELP)
    end = serializers.CharField(required=False, help_text=TIME_HELP)
    end_date = serializers.CharField(required=False, help_text=TIME_HELP)
    before_end = serializers.CharField(required=False, help_text=TIME_HELP)
    before_end_date = serializers.CharField(required=False, help_text=TIME_HELP)
    prolong_for = serializers.CharField(required=False)
    reduce_by = serializers.CharField(required=False)
    defer_by = serializers.CharField(required=False)
    advance_by = serializers.CharField(required=False)
    reservations = ReservationItemsField(child=serializers.DictField(), required=False)

    def to_internal_value(self, data):
        refuse_unknown(self, data)
        return super().to_internal_value(data)

    def validate(self, attrs):
        changes = {}
        if "name" in attrs:
            changes["name"] = attrs["name"]
        for date, field in (("start", "start_date"), ("end", "end_date")):
            given = [name for name in (date, field) if attrs.get(name)]
            given += [
                name for name, (which, _) in SHIFTS.items() if which == date and name in attrs
            ]
            if len(given) > 1:
                raise serializers.ValidationError(
                    {given[1]: f"Give one of {' and '.join(given)}, not both."}
                )
            if attrs.get(date) or attrs.get(field):
                changes[date] = parse_time(attrs.get(date) or attrs.get(field), field)
        for name, (date, sign) in SHIFTS.items():
            if name in attrs:
                changes[f"{date}_shift"] = sign * parse_elapsed(attrs[name], name)
        before = attrs.get("before_end") or attrs.get("before_end_date")
        if before:
            changes["before_end"] = parse_time(before, "before_end_date")
        if "end" in changes and changes["end"] <= timezone.now():
            raise serializers.ValidationError({"end_date": "The lease must end in the future."})
        self._reservations(attrs.get("reservations", []), changes)
        if not changes:
            raise serializers.ValidationError({"non_field_errors": "Nothing to change."})
        return changes

    def _reservations(self, items: list[dict], changes: dict) -> None:
        changed, added = {}, []
        for index, item in enumerate(items):
            has_id = item.get("id") not in (None, "")
            if not has_id and not item.get("resource_type"):
                raise serializers.ValidationError(
                    {
                        "reservations": "Each item changes a reservation (give its id) or adds "
                        "one (give its resource_type)."
                    }
                )
            body = (ReservationChangeSerializer if has_id else ReservationRequestSerializer)(
                data=item
            )
            if not body.is_valid():
                raise serializers.ValidationError({"reservations": {index: body.errors}})
            if has_id:
                values = dict(body.validated_data)
                pk = values.pop("id")
                if pk in changed:
                    raise serializers.ValidationError(
                        {"reservations": f"Reservation {pk} is changed twice."}
                    )
                changed[pk] = values
            else:
                added.append(dict(body.validated_data))
        if changed:
            changes["reservations"] = changed
        if added:
            changes["new_reservations"] = added


class HostAllocationSerializer(serializers.Serializer):
    """Capacity held on one host; without a host, capacity the reservation is owed but holds
    nowhere (its host left the free pool)."""

    host = serializers.IntegerField(source="host_id", allow_null=True)
    host_name = serializers.CharField(source="host.name", allow_null=True)
    slots = serializers.IntegerField()
    whole_host = serializers.BooleanField()


class ReservationSerializer(serializers.ModelSerializer):
    lease_id = serializers.IntegerField(read_only=True)
    allocations = HostAllocationSerializer(many=True, read_only=True)
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
            "missing",
            "missing_since",
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
            "uuid",
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


class LimitSerializer(serializers.Serializer):
    """Why they do not fit: ``needed`` of ``resource`` where only ``available`` are. ``scope``
    says what the numbers count: ``instance``, one instance against the largest usable host;
    ``one_host``, every instance asked against one host's free capacity (affinity true);
    ``all_hosts``, against all usable hosts' together (or hosts: how many there are, up, free
    or, with ``property``, offering the property fewest offer)."""

    resource = serializers.ChoiceField(choices=["vcpus", "memory_mb", "disk_gb", "hosts"])
    needed = serializers.IntegerField()
    available = serializers.IntegerField()
    scope = serializers.ChoiceField(choices=["instance", "one_host", "all_hosts"])
    property = serializers.CharField(allow_null=True)


class ShortfallSerializer(serializers.Serializer):
    """What runs short: of the ``requested`` instances (or whole hosts), only ``available`` fit
    in the window asked for; ``limit`` says which resource holds them back, and by how much."""

    resource = serializers.ChoiceField(choices=["instances", "hosts"])
    requested = serializers.IntegerField()
    available = serializers.IntegerField()
    limit = LimitSerializer(required=False)


class WindowSerializer(serializers.Serializer):
    """A window of time: from ``start`` to ``end``."""

    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class LeaseRefusedSerializer(serializers.Serializer):
    """Why a lease is refused, in words ("detail"). When it does not fit the capacity, also
    what runs short ("short") and the earliest window of the same length where it would fit
    ("earliest_fit": null when none starts within 30 days of the start asked for)."""

    detail = serializers.CharField()
    short = ShortfallSerializer(required=False)
    earliest_fit = WindowSerializer(required=False, allow_null=True)
