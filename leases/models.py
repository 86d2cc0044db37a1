"""Leases (OpenStack Blazar's design): capacity reserved for a user over a time window.

A lease holds one or more reservations: ``virtual:instance`` (N instances of a size, with an
affinity rule) or ``physical:host`` (whole hosts with given properties). Accepted
reservations hold capacity on reservable hosts through allocations; lease events start and
end them on time.
"""

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.utils.formats import date_format

from leases.properties import validate_host_properties


class LeaseStatus(models.TextChoices):
    """Blazar's lease statuses that a Corral lease takes. Blazar also has STARTING, UPDATING
    and TERMINATING, for the time its start, update and end take; Corral starts, changes and
    ends a lease each in one transaction, so no reader could ever see a lease in them, and
    they are not offered (migration ``leases`` ``lease_statuses_that_occur``)."""

    PENDING = "PENDING", "Pending"
    ACTIVE = "ACTIVE", "Active"
    TERMINATED = "TERMINATED", "Terminated"
    ERROR = "ERROR", "Error"


class EndAction(models.TextChoices):
    STOP = "stop", "Stop the lease's VMs"
    DELETE = "delete", "Delete the lease's VMs"


class Lease(models.Model):
    """A time window of reserved capacity, owned by a user (and their group, if given)."""

    name = models.CharField(max_length=80)
    # The id OpenStack's clients know the lease by (they take anything else for a name).
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="leases"
    )
    group = models.ForeignKey(
        "auth.Group", on_delete=models.SET_NULL, null=True, blank=True, related_name="leases"
    )
    start_date = models.DateTimeField()
    end_date = models.DateTimeField()
    before_end_date = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=LeaseStatus.choices, default=LeaseStatus.PENDING
    )
    degraded = models.BooleanField(default=False)
    end_action = models.CharField(max_length=8, choices=EndAction.choices, default=EndAction.STOP)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    grant_scopes = {"lease": "pk"}

    class Meta:
        ordering = ["start_date", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {}
        if self.start_date and self.end_date and self.end_date <= self.start_date:
            errors["end_date"] = "The lease must end after it starts."
        window = self.before_end_date and self.start_date and self.end_date
        if window and not self.start_date <= self.before_end_date <= self.end_date:
            errors["before_end_date"] = "Between the start and the end of the lease."
        if errors:
            raise ValidationError(errors)


class EventType(models.TextChoices):
    START = "start_lease", "Start"
    BEFORE_END = "before_end_lease", "Before end"
    END = "end_lease", "End"


class EventStatus(models.TextChoices):
    UNDONE = "UNDONE", "Not done"
    IN_PROGRESS = "IN_PROGRESS", "In progress"
    DONE = "DONE", "Done"
    ERROR = "ERROR", "Error"


class LeaseEvent(models.Model):
    """A moment in a lease's life, carried out by the ticker when its time comes."""

    lease = models.ForeignKey(Lease, on_delete=models.CASCADE, related_name="events")
    event_type = models.CharField(max_length=20, choices=EventType.choices)
    time = models.DateTimeField(db_index=True)
    status = models.CharField(
        max_length=12, choices=EventStatus.choices, default=EventStatus.UNDONE
    )
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["time", "id"]
        constraints = [
            models.UniqueConstraint(fields=["lease", "event_type"], name="one_event_of_a_type")
        ]

    def __str__(self) -> str:
        """What the admin console names the event by: "Start of lab-week, 2026-11-29 05:41"."""
        when = date_format(timezone.localtime(self.time), "DATETIME_FORMAT")
        return f"{self.get_event_type_display()} of {self.lease}, {when}"


class ResourceType(models.TextChoices):
    INSTANCE = "virtual:instance", "Instances"
    HOST = "physical:host", "Whole hosts"


class ReservationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACTIVE = "active", "Active"
    DELETED = "deleted", "Deleted"
    ERROR = "error", "Error"


# A lease, or a reservation, holds capacity while it is pending or active.
LIVE_LEASES = (LeaseStatus.PENDING, LeaseStatus.ACTIVE)
LIVE_RESERVATIONS = (ReservationStatus.PENDING, ReservationStatus.ACTIVE)


def live_reservation(path: str = "", *, start=None, end=None) -> Q:
    """Rows whose reservation holds capacity: the reservation and its lease are live
    (``LIVE_RESERVATIONS``, ``LIVE_LEASES``), and with ``start`` or ``end`` the lease overlaps
    [start, end): it ends after ``start``, starts before ``end``. ``path`` leads from the rows
    to their reservation: "" for reservations, "reservation__" for allocations and VMs.

    The one statement of the rule: ``Reservation.objects.live()`` and
    ``Allocation.objects.live()`` apply it; a VM queryset filters with it directly.
    """
    live = Q(**{f"{path}status__in": LIVE_RESERVATIONS, f"{path}lease__status__in": LIVE_LEASES})
    if start is not None:
        live &= Q(**{f"{path}lease__end_date__gt": start})
    if end is not None:
        live &= Q(**{f"{path}lease__start_date__lt": end})
    return live


class ReservationQuerySet(models.QuerySet):
    def live(self, start=None, end=None) -> "ReservationQuerySet":
        """The reservations holding capacity (over [start, end), when given):
        ``live_reservation``."""
        return self.filter(live_reservation(start=start, end=end))


class AllocationQuerySet(models.QuerySet):
    def live(self, start=None, end=None) -> "AllocationQuerySet":
        """Capacity held by live reservations (over [start, end), when given):
        ``live_reservation``."""
        return self.filter(live_reservation("reservation__", start=start, end=end))


class Reservation(models.Model):
    """What a lease reserves: instances of a size, or whole hosts."""

    lease = models.ForeignKey(Lease, on_delete=models.CASCADE, related_name="reservations")
    resource_type = models.CharField(max_length=20, choices=ResourceType.choices)
    status = models.CharField(
        max_length=10, choices=ReservationStatus.choices, default=ReservationStatus.PENDING
    )
    # virtual:instance
    vcpus = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(512)]
    )
    memory_mb = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(16), MaxValueValidator(16 * 1024**2)]
    )
    disk_gb = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(64 * 1024)]
    )
    amount = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(10_000)]
    )
    affinity = models.BooleanField(
        null=True, blank=True, help_text="True: one host; false: distinct hosts; null: any."
    )
    # physical:host
    min = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    max = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    # Both: what the hosts must offer, e.g. {"cpus": 16, "zone": {"in": ["a", "b"]}}
    # (leases/properties.py).
    host_properties = models.JSONField(
        default=dict, blank=True, validators=[validate_host_properties]
    )
    # What it holds nowhere usable (instances, or whole hosts) since a reserved host was lost,
    # and from when; kept up to date by leases/repair.py.
    missing = models.PositiveIntegerField(default=0)
    missing_since = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    grant_scopes = {"lease": "lease_id"}

    objects = ReservationQuerySet.as_manager()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.get_resource_type_display()} of {self.lease}"


class Allocation(models.Model):
    """Capacity a reservation holds on one host: ``slots`` instances, or the whole host.

    Without a host it is capacity the reservation is owed but holds nowhere (its host left the
    free pool and nothing else could take it): the row keeps the count until it is placed
    again (leases/repair.py)."""

    reservation = models.ForeignKey(
        Reservation, on_delete=models.CASCADE, related_name="allocations"
    )
    host = models.ForeignKey(
        "hosts.Host",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="allocations",
    )
    slots = models.PositiveIntegerField(default=0)
    whole_host = models.BooleanField(default=False)

    objects = AllocationQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["reservation", "host"], name="allocation_per_host")
        ]

    def __str__(self) -> str:
        what = "Whole host" if self.whole_host else f"{self.slots} instance{pluralize(self.slots)}"
        return f"{what} on {self.host or 'no host'} for lease {self.reservation.lease}"


class HostProperty(models.Model):
    """A property reservable hosts offer (a key of their capabilities), and whether it is
    private: left out of the property list shown to lease users."""

    name = models.CharField(max_length=64, unique=True)
    private = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        default_permissions = ()
        verbose_name_plural = "host properties"

    def __str__(self) -> str:
        return self.name
