"""A lease's life after it is accepted: its events carried out when due (start, the warning
before its end, the end that stops or deletes its VMs; the capacity it frees may make degraded
leases whole, leases/repair.py)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from hosts import jobs
from hosts.models import JobKind, VirtualMachine, VmStatus
from leases.models import (
    EventStatus,
    EventType,
    Lease,
    LeaseEvent,
    LeaseStatus,
    ReservationStatus,
)
from leases.repair import make_whole_quietly
from leases.reservations import lease_scope
from project import events
from project.models import EventKind

logger = logging.getLogger(__name__)


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
    """Stop (or delete) the lease's VMs; its capacity goes back to the free pool, where it may
    make a degraded lease whole (once this commits)."""
    with transaction.atomic():
        transaction.on_commit(make_whole_quietly)
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
