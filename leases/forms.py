"""The portal's lease forms (create, change the end, launch a VM) and the planner's answer to
"would this lease fit?".

Bounds come from the API's serializers, and launching validates through the API's VM
serializer, so the portal accepts and refuses exactly what the API does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django import forms
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify

from hosts import template_access
from hosts.api.serializers import VirtualMachineSerializer
from hosts.models import Template, VirtualMachine
from leases.api.serializers import ReservationRequestSerializer
from leases.capacity import DoesNotFit, plan_instances, reservable_rooms
from leases.models import Lease, Reservation, ResourceType
from project import times

# What the datetime-local input sends and shows: the minute, in the current time zone.
LOCAL_MINUTE = "%Y-%m-%dT%H:%M"
# How far in the past a typed start may be (the minute being typed is already past).
START_SLACK = timedelta(minutes=5)

AFFINITY_CHOICES = [
    ("any", "No constraint"),
    ("same", "All on the same host"),
    ("distinct", "Each on a different host"),
]
AFFINITY_VALUES = {"any": None, "same": True, "distinct": False}

_RESERVATION_FIELDS = ReservationRequestSerializer().fields


def _bounded(name: str, *, label: str, minimum: int | None = None, **extra) -> forms.IntegerField:
    """An integer field with the API's bounds for that reservation field (a stricter minimum
    where the portal asks for more)."""
    api = _RESERVATION_FIELDS[name]
    low = api.min_value if minimum is None else max(minimum, api.min_value or 0)
    return forms.IntegerField(label=label, min_value=low, max_value=api.max_value, **extra)


def _minute_input() -> forms.DateTimeInput:
    return forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL_MINUTE)


class MinuteField(forms.DateTimeField):
    """A date and time as a datetime-local input sends it (or any ISO 8601 time, with an
    offset), in UTC and before the year the API's times stop at, as the API takes it
    (``times.as_stored``). A null character is refused as in any text field: Python's ISO
    parser would otherwise read "2031-01-01T00:00\\x00" as a time."""

    def to_python(self, value):
        if isinstance(value, str) and "\x00" in value:
            validator = ProhibitNullCharactersValidator()
            raise forms.ValidationError(validator.message, code=validator.code)
        moment = super().to_python(value)
        return None if moment is None else times.as_stored(moment)


class LeaseForm(forms.Form):
    """A lease of instances of one size over a window. ``check_only`` leaves the name optional
    (the capacity answer does not need it)."""

    name = forms.CharField(max_length=80, label="Name")
    start_now = forms.BooleanField(required=False, label="Start now")
    start = MinuteField(
        required=False,
        label="Start",
        widget=_minute_input(),
        help_text="Ignored when “Start now” is ticked.",
    )
    end = MinuteField(label="End", widget=_minute_input())
    vcpus = _bounded("vcpus", label="vCPUs per instance", initial=1)
    memory_mb = _bounded("memory_mb", label="Memory per instance (MiB)", initial=1024)
    disk_gb = _bounded("disk_gb", label="Disk per instance (GB)", minimum=1, initial=10)
    amount = _bounded("amount", label="Instances", initial=1)
    affinity = forms.ChoiceField(choices=AFFINITY_CHOICES, initial="any", label="Placement")
    group = forms.ModelChoiceField(
        queryset=Group.objects.none(),
        required=False,
        to_field_name="name",
        empty_label="Only me",
        label="Shared with",
        help_text="Members of the group see and manage the lease with you.",
    )

    def __init__(self, *args, user=None, check_only: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if user is not None and user.is_authenticated:
            self.fields["group"].queryset = user.groups.order_by("name")
        if check_only:
            self.fields["name"].required = False

    def clean(self):
        data = super().clean()
        now = timezone.now()
        if data.get("start_now"):
            data["start"] = now
        elif data.get("start") is None:
            if "start" not in self.errors:
                self.add_error("start", "Pick a start, or tick “Start now”.")
            return data
        elif data["start"] < now - START_SLACK:
            self.add_error("start", "The start is in the past; tick “Start now” to start at once.")
            return data
        start, end = data["start"], data.get("end")
        if end is None:
            return data
        if end <= start:
            self.add_error("end", "The lease must end after it starts.")
        elif end <= now:
            self.add_error("end", "The lease must end in the future.")
        elif end - start > timedelta(days=settings.LEASE_MAX_DURATION_DAYS):
            self.add_error(
                "end", f"A lease may last at most {settings.LEASE_MAX_DURATION_DAYS:g} days."
            )
        return data

    def reservation_request(self) -> dict:
        """The reservation as ``create_lease`` and the planner take it (the API's shape)."""
        data = self.cleaned_data
        return {
            "resource_type": ResourceType.INSTANCE,
            "vcpus": data["vcpus"],
            "memory_mb": data["memory_mb"],
            "disk_gb": data["disk_gb"],
            "amount": data["amount"],
            "affinity": AFFINITY_VALUES[data["affinity"]],
            "host_properties": {},
        }


@dataclass
class CapacityAnswer:
    """How many of the asked instances fit in the window: ``fits`` is yes, partial or no."""

    fits: str
    fitting: int
    amount: int
    reason: str = ""


def capacity_answer(start: datetime, end: datetime, request: dict) -> CapacityAnswer:
    """The planner's answer for one instance reservation, and if it does not fit, the most
    instances that would (found on one read of the reservable capacity; nothing is locked)."""
    rooms = reservable_rooms(start, end, lock=False)
    amount = request["amount"]
    try:
        plan_instances(rooms, start, end, request)
    except DoesNotFit as exc:
        reason = str(exc)
    else:
        return CapacityAnswer("yes", amount, amount)
    # Fitting is monotonic in the amount: the largest amount that plans is found by bisection.
    low, high = 0, amount - 1
    while low < high:
        middle = (low + high + 1) // 2
        try:
            plan_instances(rooms, start, end, {**request, "amount": middle})
        except DoesNotFit:
            high = middle - 1
        else:
            low = middle
    return CapacityAnswer("partial" if low else "no", low, amount, reason)


class EndForm(forms.Form):
    """A lease's new end (later to extend it, earlier to shorten it)."""

    end = MinuteField(label="New end", widget=_minute_input())

    def clean_end(self):
        end = self.cleaned_data["end"]
        if end <= timezone.now():
            raise forms.ValidationError("The lease must end in the future.")
        return end


# Fields of the API's VM serializer -> the launch form's field that a person would correct.
LAUNCH_ERROR_FIELDS = {
    "name": "name",
    "template": "template",
    "reservation": "reservation",
    "cluster": "reservation",
    "vcpus": "template",
    "memory_mb": "template",
    "disk_gb": "template",
}


def launchable(lease: Lease):
    """The lease's reservations a VM may be launched into now (the API refuses the others)."""
    return lease.reservations.filter(status="active", lease__status="ACTIVE")


def suggested_vm_name(lease: Lease, taken: int) -> str:
    base = slugify(lease.name)[:50].strip("-_.") or f"lease-{lease.pk}"
    return f"{base}-{taken + 1}"


class LaunchForm(forms.Form):
    """A VM launched into one of the lease's active reservations (``offered``: those shown;
    all of them by default), from a template that fits the reservation chosen."""

    reservation = forms.ModelChoiceField(
        queryset=Reservation.objects.none(), empty_label=None, label="Reservation"
    )
    template = forms.ModelChoiceField(
        queryset=Template.objects.none(), empty_label=None, label="Template"
    )
    name = forms.CharField(max_length=64, label="VM name")

    def __init__(self, *args, lease: Lease, request, offered=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request
        reservations = launchable(lease) if offered is None else offered
        self.fields["reservation"].queryset = reservations
        self.fields["reservation"].label_from_instance = _reservation_label
        chosen = self._chosen(reservations)
        fitting = _templates_for(request.user, chosen) if chosen else Template.objects.none()
        # What is offered fits the chosen reservation; a template sent is checked as the API
        # checks it, so a misfit is refused with the API's reason rather than "not a choice".
        self.fitting_templates = fitting
        self.fields["template"].queryset = (
            template_access.visible(request.user) if self.is_bound else fitting
        )
        self.fields["template"].label_from_instance = _template_label
        if chosen is not None and not fitting.exists():
            none_fits = "No template you may use fits this reservation; ask an administrator."
            self.fields["template"].help_text = none_fits
        if reservations.count() > 1:
            # Choosing another reservation offers the templates that fit it.
            url = reverse("portal:lease-launch-templates", args=[lease.pk])
            self.fields["reservation"].widget.attrs.update(
                {
                    "hx-get": url,
                    "hx-trigger": "change",
                    "hx-target": "#field-template",
                    "hx-swap": "outerHTML",
                }
            )
        self.unsaved_vm: VirtualMachine | None = None

    def _chosen(self, reservations) -> Reservation | None:
        """The reservation the form is for: the one sent or given (a reservation or its id, as
        typed), else the first offered."""
        key = self.data.get("reservation") if self.is_bound else self.initial.get("reservation")
        key = str(getattr(key, "pk", key))
        chosen = None
        if key.isascii() and key.isdigit() and len(key) < 12:
            chosen = reservations.filter(pk=int(key)).first()
        return chosen or reservations.first()

    def clean(self):
        data = super().clean()
        # Shown again after an error: only what fits.
        self.fields["template"].queryset = self.fitting_templates
        if self.errors:
            return data
        body = {
            "name": data["name"],
            "template": data["template"].pk,
            "reservation": data["reservation"].pk,
        }
        vm = VirtualMachineSerializer(data=body, context={"request": self.request})
        if vm.is_valid():
            self.unsaved_vm = vm.unsaved_instance()
            return data
        for name, messages in vm.errors.items():
            for message in messages:
                self.add_error(LAUNCH_ERROR_FIELDS.get(name), str(message))
        return data


def _templates_for(user, reservation: Reservation):
    """Templates the user may use that fit the reservation: offered in its hosts' cluster, and
    for instances no larger than one (vCPUs, memory, and disk when it reserves one)."""
    clusters = set(
        reservation.allocations.filter(host__isnull=False).values_list(
            "host__cluster_id", flat=True
        )
    )
    templates = template_access.visible(user).filter(
        Q(cluster__isnull=True) | Q(cluster_id__in=clusters)
    )
    if reservation.resource_type == ResourceType.INSTANCE:
        templates = templates.filter(
            vcpus__lte=reservation.vcpus or 0, memory_mb__lte=reservation.memory_mb or 0
        )
        if reservation.disk_gb:
            templates = templates.filter(disk_gb__lte=reservation.disk_gb)
    return templates.order_by("name")


def _reservation_label(reservation: Reservation) -> str:
    if reservation.resource_type == ResourceType.HOST:
        return f"#{reservation.pk}: whole hosts"
    return (
        f"#{reservation.pk}: {reservation.amount} × {reservation.vcpus} vCPU, "
        f"{reservation.memory_mb} MiB"
    )


def _template_label(template: Template) -> str:
    size = f"{template.vcpus} vCPU, {template.memory_mb} MiB, {template.disk_gb} GB"
    return f"{template.name} ({size})"
