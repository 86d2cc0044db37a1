"""Lease use cases: create, update and delete leases atomically.

Creating or changing a lease plans its allocations under a lock on every reservable host's
row, so two users racing for the last capacity cannot both win, and a user's quotas are
counted under the same lock; a change that does not fit leaves the lease exactly as it was
(the transaction rolls back).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts import quotas
from hosts.models import Host, VirtualMachine
from leases.capacity import DoesNotFit, earliest_fit, lock_reservable_hosts, plan
from leases.error_codes import LeaseErrorCode
from leases.lifecycle import end_lease
from leases.models import (
    Allocation,
    EventStatus,
    EventType,
    Lease,
    LeaseEvent,
    LeaseStatus,
    Reservation,
    ReservationStatus,
    ResourceType,
)
from leases.properties import HYPERVISOR_PROPERTIES, matches
from leases.repair import make_whole_quietly
from leases.reservations import (
    RESERVATION_FIELDS,
    launched_on,
    lease_scope,
)
from leases.sizes import instance_count, quantity
from project import events
from project.access.grants import grant_role
from project.errors import Refused
from project.models import EventKind, Role

# How far after a refused start the earliest window that fits is looked for.
FIT_SEARCH = timedelta(days=30)


class LeaseRefused(Refused):
    def __init__(
        self, message: str, *, field: str | None = None, details: dict | None = None
    ) -> None:
        super().__init__(LeaseErrorCode.LEASE_REFUSED, message, field=field, details=details)


def _length(duration: timedelta) -> str:
    """A window's length as an adjective: "2-hour", "3-day", "90-minute"."""
    minutes = int(duration.total_seconds() // 60)
    for unit, size in (("day", 24 * 60), ("hour", 60)):
        if minutes % size == 0:
            return f"{minutes // size}-{unit}"
    return f"{minutes}-minute"


def _does_not_fit(exc: DoesNotFit, start: datetime, end: datetime, requests) -> LeaseRefused:
    """The refusal of a lease that does not fit: what runs short, and the earliest window of
    the same length that would fit (if one starts within ``FIT_SEARCH``)."""
    window = earliest_fit(start, end, requests, within=FIT_SEARCH)
    length = _length(end - start)
    if window is None:
        after = (
            f"No {length} window that starts in the {FIT_SEARCH.days} days after "
            f"{start:%Y-%m-%d %H:%M} (UTC) fits."
        )
    else:
        after = f"The earliest {length} window that fits starts {window[0]:%Y-%m-%d %H:%M} (UTC)."
    details = {"earliest_fit": None if window is None else {"start": window[0], "end": window[1]}}
    if exc.short() is not None:
        details["short"] = exc.short()
    return LeaseRefused(f"The lease does not fit: {exc}. {after}", details=details)


def _check_duration(start: datetime, end: datetime) -> None:
    longest = timedelta(days=settings.LEASE_MAX_DURATION_DAYS)
    if end - start > longest:
        raise LeaseRefused(f"A lease may last at most {settings.LEASE_MAX_DURATION_DAYS:g} days.")


def _check_quotas(owner, start: datetime, end: datetime, planned, exclude=None) -> None:
    """What the owner's leases would hold at once, against the quotas.

    The limits are the owner's lease limits in Corral's quotas (``hosts.quotas.lease_limits``:
    the most generous of their own, their groups' and the default row, the ``LEASE_QUOTA_*``
    settings where no default row sets one). Called with the reservable hosts' rows locked (by
    ``plan``), so two requests of one user take turns and the second counts the first. A whole
    host counts as one instance with all its CPUs and memory.
    """
    limits = quotas.lease_limits(owner)
    limits = {name: limits[f"lease_{name}"] for name in ("instances", "vcpus", "memory_mb")}
    if all(limit is None for limit in limits.values()):
        return
    live = Reservation.objects.live(start, end).filter(lease__owner=owner)
    if exclude is not None:
        live = live.exclude(lease=exclude)
    held = {"instances": 0, "vcpus": 0, "memory_mb": 0}

    def add(instances: int, vcpus: int, memory_mb: int) -> None:
        held["instances"] += instances
        held["vcpus"] += vcpus * instances
        held["memory_mb"] += memory_mb * instances

    for amount, vcpus, memory_mb in live.filter(resource_type=ResourceType.INSTANCE).values_list(
        "amount", "vcpus", "memory_mb"
    ):
        add(amount or 0, vcpus or 0, memory_mb or 0)
    whole = list(
        Allocation.objects.filter(
            reservation__in=live, whole_host=True, host__isnull=False
        ).values_list("host_id", flat=True)
    )
    for request, chosen in planned:
        if request["resource_type"] == ResourceType.INSTANCE:
            add(request["amount"], request["vcpus"], request["memory_mb"])
        else:
            whole += [host for host, _, _ in chosen]
    sizes = {
        pk: (cpus or 0, memory_mb or 0)
        for pk, cpus, memory_mb in Host.objects.filter(pk__in=whole).values_list(
            "pk", "cpus", "memory_mb"
        )
    }
    for host in whole:
        add(1, *sizes[host])
    for name, limit in limits.items():
        if limit is not None and held[name] > limit:
            raise LeaseRefused(
                f"Your leases would hold {_amount(name, held[name])} at once; "
                f"your quota is {_amount(name, limit)}."
            )


def _amount(resource: str, count: int) -> str:
    """An amount of what a lease quota counts, in words: "5 instances", "5 vCPUs", "4096 MiB
    of memory"."""
    if resource == "instances":
        return instance_count(count)
    if resource == "memory_mb":
        return f"{count} MiB of memory"
    return quantity(resource, count)


def _store(lease: Lease, planned) -> None:
    for request, chosen in planned:
        reservation = Reservation.objects.create(
            lease=lease,
            **{name: request.get(name) for name in RESERVATION_FIELDS if name in request},
            status=ReservationStatus.ACTIVE
            if lease.status == LeaseStatus.ACTIVE
            else ReservationStatus.PENDING,
        )
        Allocation.objects.bulk_create(
            Allocation(reservation=reservation, host_id=host, slots=slots, whole_host=whole)
            for host, slots, whole in chosen
        )


def _schedule_events(lease: Lease) -> None:
    """Create or move the lease's events. A warning already given is armed again when the
    end moves later: the owner is warned before the end that now holds."""
    now = timezone.now()
    times = {
        EventType.START: lease.start_date,
        EventType.BEFORE_END: lease.before_end_date,
        EventType.END: lease.end_date,
    }
    for event_type, time in times.items():
        if time is None:
            LeaseEvent.objects.filter(lease=lease, event_type=event_type).delete()
            continue
        event, created = LeaseEvent.objects.get_or_create(
            lease=lease, event_type=event_type, defaults={"time": time}
        )
        if created or event.time == time:
            continue
        if event.status == EventStatus.UNDONE or (event.status == EventStatus.DONE and time > now):
            event.time, event.status, event.done_at = time, EventStatus.UNDONE, None
            event.save(update_fields=["time", "status", "done_at"])


def _check_reservations_of(lease: Lease, changes: dict[int, dict]) -> None:
    """A change for a reservation the lease does not hold is a mistake, not a no-op."""
    held = lease.reservations.exclude(status=ReservationStatus.DELETED).values_list("pk", flat=True)
    unknown = sorted(set(changes) - set(held))
    if unknown:
        raise Refused(
            LeaseErrorCode.UNKNOWN_RESERVATION,
            f"Lease {lease.name} has no reservation {', '.join(map(str, unknown))}.",
            field="reservations",
        )


def _changed_request(reservation: Reservation, request: dict, change: dict) -> dict:
    """The reservation's request with ``change`` applied, refused where the change would
    take capacity away from VMs it runs."""
    change = dict(change)
    kind = change.pop("resource_type", reservation.resource_type)
    if kind != reservation.resource_type:
        raise Refused(
            LeaseErrorCode.RESOURCE_TYPE_FIXED,
            f"Reservation {reservation.pk} is {reservation.resource_type}; "
            "its resource_type cannot change.",
            field="reservations",
        )
    other_kind = (
        ("min", "max")
        if kind == ResourceType.INSTANCE
        else ("vcpus", "memory_mb", "disk_gb", "amount", "affinity")
    )
    wrong = [name for name in other_kind if name in change]
    if wrong:
        raise Refused(
            LeaseErrorCode.NOT_OF_RESOURCE_TYPE,
            f"Reservation {reservation.pk} is {kind}; it has no {', '.join(wrong)}.",
            field="reservations",
        )
    properties = dict(reservation.host_properties or {})
    parts = change.pop("hypervisor_properties", None), change.pop("resource_properties", None)
    if parts[0] is not None:
        properties = {k: v for k, v in properties.items() if k not in HYPERVISOR_PROPERTIES}
        properties.update(parts[0])
    if parts[1] is not None:
        properties = {k: v for k, v in properties.items() if k in HYPERVISOR_PROPERTIES}
        properties.update(parts[1])
    if "host_properties" in change:
        properties = dict(change.pop("host_properties") or {})
    request = {**request, **change, "host_properties": properties}
    vms = list(reservation.vms.select_related("host"))
    if reservation.resource_type == ResourceType.HOST:
        if request["min"] > request["max"]:
            raise Refused(
                LeaseErrorCode.MIN_ABOVE_MAX,
                f"Reservation {reservation.pk}: max must be at least min.",
                field="reservations",
            )
        hosts = {vm.host_id for vm in vms if vm.host_id}
        if len(hosts) > request["max"]:
            raise LeaseRefused(
                f"Reservation {reservation.pk} runs VMs on {len(hosts)} hosts; its max cannot "
                "go below that."
            )
    elif len(vms) > request["amount"]:
        raise LeaseRefused(
            f"Reservation {reservation.pk} runs {len(vms)} VMs; its amount cannot go below that."
        )
    for name, label in (("vcpus", "vCPUs"), ("memory_mb", "MiB of memory")):
        largest = max((getattr(vm, name) or 0 for vm in vms), default=0)
        if request.get(name) is not None and request[name] < largest:
            raise LeaseRefused(
                f"Reservation {reservation.pk} runs a VM of {largest} {label}; its {name} "
                "cannot go below that."
            )
    for vm in vms:
        if vm.host is not None and not matches(vm.host, properties):
            raise LeaseRefused(
                f"Reservation {reservation.pk} runs VM {vm.name} on {vm.host.name}, which does "
                "not offer those properties."
            )
    return request


def default_before_end(start: datetime, end: datetime) -> datetime:
    lead = timedelta(minutes=settings.LEASE_BEFORE_END_MINUTES)
    return max(start, end - lead)


@transaction.atomic
def create_lease(
    *,
    owner,
    name: str,
    start: datetime,
    end: datetime,
    reservations: list[dict],
    before_end: datetime | None = None,
    group=None,
    end_action: str = "stop",
) -> Lease:
    """Accept a lease if every reservation fits the reservable capacity over its window. A
    lease may reserve nothing (no reservations, as Blazar allows): it holds no capacity and
    still has its window, its events and its status."""
    _check_duration(start, end)
    try:
        planned = plan(start, end, reservations, lock=True)
    except DoesNotFit as exc:
        raise _does_not_fit(exc, start, end, reservations) from exc
    _check_quotas(owner, start, end, planned)
    lease = Lease.objects.create(
        name=name,
        owner=owner,
        group=group,
        start_date=start,
        end_date=end,
        before_end_date=before_end or default_before_end(start, end),
        end_action=end_action,
    )
    _store(lease, planned)
    _schedule_events(lease)
    grant_role(Role.objects.get(name="LeaseOwner"), lease, user=owner)
    if group is not None:
        grant_role(Role.objects.get(name="LeaseOwner"), lease, group=group)
    events.emit(
        EventKind.CHANGED, "lease", lease.pk, f"Lease {lease.name} accepted", **lease_scope(lease)
    )
    return lease


def _moved(moment: datetime, shift: timedelta | None, field: str) -> datetime:
    """``moment`` moved by ``shift``, refused beyond the times every time zone can show."""
    try:
        moved = moment + (shift or timedelta())
    except OverflowError:
        moved = None
    if moved is None or not 1 < moved.year < 9999:
        raise Refused(
            LeaseErrorCode.DATE_OUT_OF_RANGE, "That moves the date out of range.", field=field
        )
    return moved


@transaction.atomic
def update_lease(lease: Lease, changes: dict) -> Lease:
    """Change the window, the warning time, the name or the reservations; re-planned
    atomically, all or nothing.

    ``changes`` may hold ``name``, ``start``/``end`` (times) or ``start_shift``/``end_shift``
    (timedeltas added to the lease's dates as stored when the change runs, so two extensions
    at once both count), ``before_end``, ``reservations`` ({reservation id: {field: value}}),
    ``amounts`` ({reservation id: amount}) and ``new_reservations`` (requests as for
    create_lease). A lease that has started can be extended or shortened but not moved; a
    reservation may grow whenever capacity allows and shrink while its VMs still fit. The
    warning before the end keeps its distance from the end unless a new one is given. A
    change of window or reservations plans the whole lease again (a degraded lease must then
    fit whole, and is whole after it); a new name or warning time alone plans nothing.
    """
    # The reservable hosts' rows before the lease's, as every planner and repair takes them.
    lock_reservable_hosts()
    lease = Lease.objects.select_for_update(no_key=True).get(pk=lease.pk)
    if lease.status in (LeaseStatus.TERMINATED, LeaseStatus.ERROR):
        raise LeaseRefused(f"Lease {lease.name} has ended; it cannot change.")
    start = _moved(changes.get("start", lease.start_date), changes.get("start_shift"), "start_date")
    end = _moved(changes.get("end", lease.end_date), changes.get("end_shift"), "end_date")
    started = lease.status == LeaseStatus.ACTIVE
    if started and start != lease.start_date:
        raise LeaseRefused("The lease has started; its start cannot move (extend its end).")
    if end <= start:
        raise Refused(
            LeaseErrorCode.END_BEFORE_START, "The lease must end after it starts.", field="end_date"
        )
    if started and end <= timezone.now():
        raise LeaseRefused("A running lease cannot end in the past; delete it to end it now.")
    if end <= timezone.now():
        raise Refused(
            LeaseErrorCode.END_IN_PAST, "The lease must end in the future.", field="end_date"
        )
    before_end = changes.get("before_end")
    if before_end is not None and not start <= before_end <= end:
        raise Refused(
            LeaseErrorCode.BEFORE_END_OUTSIDE_LEASE,
            "Between the start and the end of the lease.",
            field="before_end_date",
        )
    reservation_changes = {
        pk: dict(change) for pk, change in changes.get("reservations", {}).items()
    }
    for pk, amount in changes.get("amounts", {}).items():
        reservation_changes.setdefault(pk, {})["amount"] = amount
    _check_reservations_of(lease, reservation_changes)
    moved = (start, end) != (lease.start_date, lease.end_date)
    was_degraded = lease.degraded
    if moved or reservation_changes or changes.get("new_reservations"):
        _plan_again(lease, start, end, reservation_changes, changes.get("new_reservations", []))
    if "name" in changes:
        lease.name = changes["name"]
    if before_end is not None:
        lease.before_end_date = before_end
    elif moved and lease.before_end_date is not None:
        # The warning moves with the end, the same distance before it (never before the start).
        lead = lease.end_date - lease.before_end_date
        lease.before_end_date = max(start, end - lead)
    lease.start_date, lease.end_date = start, end
    lease.save()
    _schedule_events(lease)
    whole = "; it is no longer degraded" if was_degraded and not lease.degraded else ""
    events.emit(
        EventKind.CHANGED,
        "lease",
        lease.pk,
        f"Lease {lease.name} updated{whole}",
        **lease_scope(lease),
    )
    # Capacity it gave back may make another lease whole.
    transaction.on_commit(make_whole_quietly)
    return lease


def _plan_again(lease: Lease, start, end, reservation_changes: dict, added: list[dict]) -> None:
    """Plan the lease's reservations (changed, and added) over its new window, all of them
    whole, and store the result (LeaseRefused when they do not fit)."""
    requests = []
    for reservation in lease.reservations.exclude(status=ReservationStatus.DELETED):
        request = {name: getattr(reservation, name) for name in RESERVATION_FIELDS}
        if reservation.pk in reservation_changes:
            request = _changed_request(reservation, request, reservation_changes[reservation.pk])
        request["keep"] = launched_on(reservation)
        request["id"] = reservation.pk
        requests.append(request)
    requests += [{**request, "id": None} for request in added]
    _check_duration(start, end)
    try:
        planned = plan(start, end, requests, lock=True, exclude_lease=lease)
    except DoesNotFit as exc:
        raise LeaseRefused(f"The change does not fit: {exc}.") from exc
    _check_quotas(lease.owner, start, end, planned, exclude=lease)
    _store(lease, [(request, chosen) for request, chosen in planned if request["id"] is None])
    for request, chosen in planned:
        if request["id"] is None:
            continue
        reservation = Reservation.objects.get(pk=request["id"])
        for name in RESERVATION_FIELDS:
            setattr(reservation, name, request.get(name))
        reservation.missing, reservation.missing_since = 0, None  # planned whole
        reservation.full_clean(exclude=["lease"])
        reservation.save()
        reservation.allocations.all().delete()
        Allocation.objects.bulk_create(
            Allocation(reservation=reservation, host_id=host, slots=slots, whole_host=whole)
            for host, slots, whole in chosen
        )
    lease.degraded = False


def delete_lease(lease: Lease) -> None:
    """Delete a lease; an active one is ended first (its VMs stopped or deleted). The capacity
    it frees may make a degraded lease whole. The deletion is said in the event feed."""
    if lease.status == LeaseStatus.ACTIVE:
        end_lease(lease)
    with transaction.atomic():
        # The lease's row first, then its rows below, as a repair takes them.
        if Lease.objects.select_for_update().filter(pk=lease.pk).exists():
            VirtualMachine.objects.filter(reservation__lease=lease).update(reservation=None)
            Lease.objects.filter(pk=lease.pk).delete()
            events.emit(
                EventKind.CHANGED,
                "lease",
                lease.pk,
                f"Lease {lease.name} deleted",
                {"deleted": True},
                **lease_scope(lease),
            )
        transaction.on_commit(make_whole_quietly)
