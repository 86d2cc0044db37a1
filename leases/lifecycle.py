"""A lease's life after it is accepted: its events carried out when due (start, the warning
before its end, the end that stops or deletes its VMs), and its capacity moved off a reservable
host that failed."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from hosts import jobs
from hosts.models import JobKind, VirtualMachine, VmStatus
from leases.capacity import DoesNotFit, Slot, plan_hosts, plan_instances, reservable_rooms
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
from leases.reservations import RESERVATION_FIELDS, launched_on
from project import events
from project.models import EventKind

logger = logging.getLogger(__name__)


def lease_scope(lease: Lease) -> dict:
    """Who an event about the lease concerns: the lease and its owner."""
    return {"lease_id": lease.pk, "user_id": lease.owner_id}


def start_lease(lease: Lease) -> None:
    with transaction.atomic():
        Lease.objects.filter(pk=lease.pk).update(status=LeaseStatus.ACTIVE)
        lease.reservations.filter(status=ReservationStatus.PENDING).update(
            status=ReservationStatus.ACTIVE
        )
        events.emit(
            EventKind.CHANGED,
            "lease",
            lease.pk,
            f"Lease {lease.name} started",
            **lease_scope(lease),
        )


def warn_before_end(lease: Lease) -> None:
    events.alert(
        "lease",
        lease.pk,
        f"Lease {lease.name} ends at {lease.end_date:%Y-%m-%d %H:%M}; its VMs will be "
        f"{'deleted' if lease.end_action == 'delete' else 'stopped'} then.",
        **lease_scope(lease),
    )


def end_lease(lease: Lease) -> None:
    """Stop (or delete) the lease's VMs; its capacity goes back to the free pool."""
    with transaction.atomic():
        for vm in VirtualMachine.objects.filter(reservation__lease=lease):
            if vm.status not in (VmStatus.DOWN, VmStatus.UNKNOWN):
                jobs.submit(JobKind.POWEROFF, vm=vm)
            if lease.end_action == "delete":
                jobs.submit(JobKind.DELETE, vm=vm)
        lease.reservations.exclude(status=ReservationStatus.DELETED).update(
            status=ReservationStatus.DELETED
        )
        Lease.objects.filter(pk=lease.pk).update(status=LeaseStatus.TERMINATED)
        events.emit(
            EventKind.CHANGED, "lease", lease.pk, f"Lease {lease.name} ended", **lease_scope(lease)
        )


HANDLERS = {
    EventType.END: end_lease,
    EventType.START: start_lease,
    EventType.BEFORE_END: warn_before_end,
}
# At the same instant an ending lease finishes before the next one starts on its capacity.
ORDER = {EventType.END: 0, EventType.BEFORE_END: 1, EventType.START: 2}


def run_due_events(now: datetime | None = None) -> int:
    """Carry out every lease event whose time has come (missed ones too); how many ran."""
    now = now or timezone.now()
    due = list(
        LeaseEvent.objects.filter(status=EventStatus.UNDONE, time__lte=now).select_related("lease")
    )
    due.sort(key=lambda e: (e.time, ORDER[e.event_type], e.pk))
    ran = 0
    for event in due:
        with transaction.atomic():
            claimed = LeaseEvent.objects.filter(pk=event.pk, status=EventStatus.UNDONE).update(
                status=EventStatus.IN_PROGRESS
            )
        if not claimed:
            continue  # another ticker took it
        try:
            lease = Lease.objects.get(pk=event.lease_id)
            if event.event_type == EventType.START and lease.status != LeaseStatus.PENDING:
                outcome = EventStatus.DONE
            else:
                HANDLERS[event.event_type](lease)
                outcome = EventStatus.DONE
        except Exception:
            logger.exception("lease event %s failed", event.pk)
            outcome = EventStatus.ERROR
            Lease.objects.filter(pk=event.lease_id).update(status=LeaseStatus.ERROR)
        LeaseEvent.objects.filter(pk=event.pk).update(status=outcome, done_at=timezone.now())
        ran += 1
    return ran


def on_host_unreachable(sender, host, **kwargs) -> None:
    """``hosts.signals.host_unreachable``: plan the live reservations on a lost reservable host
    again on the others (never fatal to the sync that noticed)."""
    if not host.reservable:
        return
    try:
        reallocate_from(host.pk)
    except Exception:
        logger.exception("moving lease capacity off host %s failed", host.pk)


def reallocate_from(host_id: int) -> list[str]:
    """A reservable host failed: move the capacity its live reservations held to other
    reservable hosts; a lease whose reservation cannot move is marked degraded (an alert
    says so). Returns what happened, per reservation."""
    outcomes = []
    affected = Reservation.objects.filter(
        allocations__host_id=host_id,
        status__in=[ReservationStatus.PENDING, ReservationStatus.ACTIVE],
        lease__status__in=[LeaseStatus.PENDING, LeaseStatus.ACTIVE],
    ).distinct()
    for reservation in affected.select_related("lease"):
        lease = reservation.lease
        start = max(lease.start_date, timezone.now())
        with transaction.atomic():
            rooms = reservable_rooms(start, lease.end_date, lock=True, exclude_lease=lease)
            rooms.pop(host_id, None)
            for other in Allocation.objects.filter(reservation__lease=lease).exclude(
                reservation=reservation
            ):
                if other.host_id in rooms:
                    rooms[other.host_id].usage.append(
                        Slot(
                            start=lease.start_date,
                            end=lease.end_date,
                            vcpus=(other.reservation.vcpus or 0) * other.slots,
                            memory_mb=(other.reservation.memory_mb or 0) * other.slots,
                            whole_host=other.whole_host,
                        )
                    )
            request = {name: getattr(reservation, name) for name in RESERVATION_FIELDS}
            request["keep"] = launched_on(reservation)
            try:
                if reservation.resource_type == ResourceType.HOST:
                    chosen = [
                        (h, 0, True) for h in plan_hosts(rooms, start, lease.end_date, request)
                    ]
                else:
                    chosen = [
                        (h, slots, False)
                        for h, slots in plan_instances(rooms, start, lease.end_date, request)
                    ]
            except DoesNotFit as exc:
                Lease.objects.filter(pk=lease.pk).update(degraded=True)
                message = (
                    f"Lease {lease.name} is degraded: a reserved host failed and its capacity "
                    f"cannot move ({exc})."
                )
                events.alert("lease", lease.pk, message, **lease_scope(lease))
                outcomes.append(message)
                continue
            reservation.allocations.all().delete()
            Allocation.objects.bulk_create(
                Allocation(reservation=reservation, host_id=h, slots=s, whole_host=w)
                for h, s, w in chosen
            )
            message = f"Lease {lease.name}: capacity moved off the failed host."
            events.emit(EventKind.CHANGED, "lease", lease.pk, message, **lease_scope(lease))
            outcomes.append(message)
    return outcomes
