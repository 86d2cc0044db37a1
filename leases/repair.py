"""Leases never lose capacity silently: what a reserved host can no longer give is planned again
on free reservable capacity for the rest of the lease's window, or the lease is marked degraded
with an alert naming what is missing; degraded clears, with an event, when capacity returns.

Each allocation of a reservation is *usable* (its host is reservable and Up), *parked* (its
host is reservable but in maintenance, not responding, in error or not connected yet: it may
come back, so capacity that cannot move stays held there for its return) or *unplaced* (no
host: it was deleted or left the free pool). Repairing a reservation keeps its usable allocations,
places what the others held on free reservable capacity (hosts running its VMs first), keeps
parked what does not fit and leaves the rest unplaced; ``missing`` counts the instances (or
whole hosts) not on usable hosts, ``missing_since`` from when.

Locks: every reservable host's row (in id order), then the leases changed (in id order), as
every lease planner does, so repairs, lease changes and host changes take turns without
deadlocks.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from hosts.models import Host, HostStatus
from leases.capacity import lock_reservable_hosts, reservable_rooms
from leases.models import (
    LIVE_LEASES,
    LIVE_RESERVATIONS,
    Allocation,
    Lease,
    Reservation,
    ResourceType,
)
from leases.properties import matches
from leases.reservations import launched_on, lease_scope
from project import events
from project.models import EventKind

logger = logging.getLogger(__name__)

# Statuses of a reservable host that gives nothing now but may come back (only an Up host
# gives capacity), and why.
LOST = {
    HostStatus.MAINTENANCE: "is in maintenance",
    HostStatus.NON_RESPONSIVE: "is not responding",
    HostStatus.ERROR: "is in error",
    HostStatus.CONNECTING: "is not connected yet",
}
USABLE, PARKED, UNPLACED = "usable", "parked", "unplaced"


@dataclass
class Outcome:
    """What one repair did to one reservation."""

    lease: Lease
    reservation: Reservation
    moved: int
    missing: int
    messages: list[str]

    def as_dict(self) -> dict:
        return {
            "lease_id": str(self.lease.uuid),
            "lease_name": self.lease.name,
            "reservation_id": str(self.reservation.pk),
            "moved": self.moved,
            "missing": self.missing,
            "message": " ".join(self.messages),
        }


def withdraw_host(host_id: int, why: str, *, leaves_pool: bool) -> list[Outcome]:
    """Host ``host_id`` gives no capacity from now on (``why``: "is in maintenance", …): every
    live reservation holding it is repaired. With ``leaves_pool`` (no longer reservable,
    deleted) what cannot move is left unplaced, otherwise it stays parked on the host for its
    return. Inside the caller's transaction when there is one (its locks come first)."""
    holding = Reservation.objects.live(timezone.now()).filter(allocations__host_id=host_id)
    holding = holding.distinct()
    reservable = Host.objects.filter(pk=host_id, reservable=True).exists()
    if not reservable and not holding.exists():
        return []  # nothing was ever planned on it: no lock needed
    return _repair(holding, {host_id: (why, leaves_pool)})


def make_whole() -> list[Outcome]:
    """Repair every live reservation that is short of capacity or holds some on a host that
    gave it up (and leases still marked degraded): when capacity returns, and periodically."""
    unusable = Allocation.objects.filter(reservation=OuterRef("pk")).filter(
        Q(host__isnull=True) | Q(host__reservable=False) | Q(host__status__in=list(LOST))
    )
    candidates = Reservation.objects.live(timezone.now()).filter(
        Q(missing__gt=0) | Q(lease__degraded=True) | Exists(unusable)
    )
    if not candidates.exists():
        return []
    return _repair(candidates, {})


def make_whole_quietly(**kwargs) -> None:
    """make_whole() for signal receivers and commit hooks: a failure is logged (the loop
    tries again), never raised into what triggered it."""
    try:
        make_whole()
    except Exception:
        logger.exception("making leases whole failed")


def _repair(candidates, overrides: dict[int, tuple[str, bool]]) -> list[Outcome]:
    with transaction.atomic():
        lock_reservable_hosts()
        reservations = list(candidates.order_by("lease_id", "pk"))
        if not reservations:
            return []
        leases = {
            lease.pk: lease
            for lease in Lease.objects.select_for_update(no_key=True)
            .filter(pk__in={r.lease_id for r in reservations})
            .order_by("pk")
        }
        now = timezone.now()
        outcomes = []
        for reservation in reservations:
            lease = leases.get(reservation.lease_id)
            if lease is None or lease.status not in LIVE_LEASES or lease.end_date <= now:
                continue  # ended or deleted while we waited for its lock
            reservation.refresh_from_db()
            if reservation.status not in LIVE_RESERVATIONS:
                continue
            outcome = _repair_one(reservation, lease, now, overrides)
            if outcome is not None:
                outcomes.append(outcome)
        for lease in leases.values():
            _settle(lease)
    return outcomes


def _state(row: Allocation, overrides) -> tuple[str, str]:
    """(usable, parked or unplaced; why the host gives nothing, if it does not)."""
    if row.host_id is None:
        return UNPLACED, "a host left the free pool"
    host = row.host
    if row.host_id in overrides:
        why, leaves = overrides[row.host_id]
        return (UNPLACED if leaves else PARKED), f"host {host.name} {why}"
    if not host.reservable:
        return UNPLACED, f"host {host.name} is no longer reservable"
    if host.status in LOST:
        return PARKED, f"host {host.name} {LOST[host.status]}"
    return USABLE, ""


def _repair_one(reservation: Reservation, lease: Lease, now: datetime, overrides):
    start, end = max(lease.start_date, now), lease.end_date
    rows = list(reservation.allocations.select_related("host"))
    states = {row.pk: _state(row, overrides) for row in rows}
    causes = sorted({why for state, why in states.values() if state != USABLE})
    rooms = reservable_rooms(start, end, lock=False, leave_vms_of=reservation.pk)
    for host_id in overrides:
        rooms.pop(host_id, None)
    running = launched_on(reservation)
    if reservation.resource_type == ResourceType.HOST:
        wanted, gained, missing, total = _whole_hosts(reservation, rows, states, rooms, start, end)
    else:
        wanted, gained, missing, total = _instances(
            reservation, rows, states, rooms, start, end, running
        )
    before = sorted((row.host_id or 0, row.slots, row.whole_host) for row in rows)
    if sorted((host or 0, slots, whole) for host, slots, whole in wanted) != before:
        reservation.allocations.all().delete()
        Allocation.objects.bulk_create(
            Allocation(reservation=reservation, host_id=host, slots=slots, whole_host=whole)
            for host, slots, whole in wanted
        )
    was_missing = reservation.missing
    since = (reservation.missing_since or start) if missing else None
    if (was_missing, reservation.missing_since) != (missing, since):
        Reservation.objects.filter(pk=reservation.pk).update(missing=missing, missing_since=since)
        reservation.missing, reservation.missing_since = missing, since
    messages = _tell(lease, reservation, gained, (was_missing, missing, total), since, causes)
    if not messages:
        return None
    return Outcome(lease, reservation, sum(gained.values()), missing, messages)


def _instances(reservation, rows, states, rooms, start, end, running):
    """[(host, slots, False)] for an instance reservation; the slots placed anew per host, how
    many are missing and how many it asks for."""
    amount = reservation.amount or 0
    usable, parked = Counter(), Counter()
    for row in rows:
        state = states[row.pk][0]
        if state == USABLE:
            usable[row.host_id] += row.slots
        elif state == PARKED:
            parked[row.host_id] += row.slots
    short = amount - sum(usable.values())
    gained: Counter = Counter()
    if short > 0:
        free = {
            host: room.free_slots(
                start,
                end,
                reservation.vcpus or 1,
                reservation.memory_mb or 1,
                reservation.disk_gb or 0,
            )
            for host, room in rooms.items()
            if room.host.status == HostStatus.UP and matches(room.host, reservation.host_properties)
        }
        # Hosts running the reservation's VMs first, then the roomiest, then by id.
        ranked = sorted(free, key=lambda h: (-min(running.get(h, 0), free[h]), -free[h], h))
        if reservation.affinity is True:
            usable, gained = _one_host(usable, parked, amount, free, ranked, running)
        elif reservation.affinity is False:
            for host in [h for h in ranked if free[h] >= 1 and h not in usable][:short]:
                gained[host] = 1
        else:
            left = short
            for host in ranked:
                take = min(free[host], left)
                if take:
                    gained[host] += take
                    left -= take
    held = usable + gained
    remaining = max(0, amount - sum(held.values()))
    kept = Counter()
    if not (reservation.affinity is True and held):
        left = remaining
        for host, slots in sorted(parked.items(), key=lambda item: (-item[1], item[0])):
            take = min(slots, left)
            if take:
                kept[host] = take
                left -= take
    unplaced = remaining - sum(kept.values())
    wanted = [(host, slots, False) for host, slots in sorted((held + kept).items())]
    if unplaced:
        wanted.append((None, unplaced, False))
    return wanted, +gained, remaining, amount


def _one_host(usable, parked, amount, free, ranked, running):
    """Affinity: every instance on one host. Grow on the host it holds, or move it all to a
    host with room for all (unless its VMs run where it is); with nothing usable and nothing
    that may come back, hold what one host can give."""
    gained: Counter = Counter()
    current = next(iter(usable), None)
    short = amount - sum(usable.values())
    if current is not None:
        gained[current] = min(short, free.get(current, 0))
        if gained[current] < short and not running.get(current):
            roomy = [h for h in ranked if h != current and free[h] >= amount]
            if roomy:
                return Counter(), Counter({roomy[0]: amount})
        return usable, +gained
    roomy = [h for h in ranked if free[h] >= amount]
    if roomy:
        return usable, Counter({roomy[0]: amount})
    if not parked:
        best = max(ranked, key=lambda h: (free[h], -h), default=None)
        if best is not None and free[best] > 0:
            gained[best] = min(free[best], short)
    return usable, gained


def _whole_hosts(reservation, rows, states, rooms, start, end):
    """[(host, 0, True)] for a whole-host reservation; the hosts placed anew, how many are
    missing and how many it holds."""
    usable = [row.host_id for row in rows if states[row.pk][0] == USABLE]
    parked = sorted(row.host_id for row in rows if states[row.pk][0] == PARKED)
    short = len(rows) - len(usable)
    free = sorted(
        host
        for host, room in rooms.items()
        if room.host.status == HostStatus.UP
        and host not in usable
        and matches(room.host, reservation.host_properties)
        and room.entirely_free(start, end)
    )
    gained = free[:short]
    remaining = short - len(gained)
    kept = parked[:remaining]
    wanted = [(host, 0, True) for host in sorted(usable + gained + kept)]
    wanted += [(None, 0, True)] * (remaining - len(kept))
    return wanted, Counter(gained), remaining, len(rows)


def _units(count: int, whole_hosts: bool) -> str:
    noun = "host" if whole_hosts else "instance"
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _tell(lease, reservation, gained: Counter, counts, since, causes) -> list[str]:
    """The events of one repair (and their texts, for whoever asked for it)."""
    was_missing, missing, total = counts
    hosts = reservation.resource_type == ResourceType.HOST
    scope = lease_scope(lease)
    why = f" as {', '.join(causes)}" if causes else ""
    because = f" ({', '.join(causes)})" if causes else ""
    messages = []
    if gained:
        names = Host.objects.filter(pk__in=list(gained)).order_by("name")
        message = (
            f"Lease {lease.name}: capacity moved{why}: reservation {reservation.pk} now also "
            f"holds {_units(sum(gained.values()), hosts)} on "
            f"{', '.join(names.values_list('name', flat=True))}."
        )
        events.emit(EventKind.CHANGED, "lease", lease.pk, message, **scope)
        messages.append(message)
    if missing and missing != was_missing:
        short = (
            f"reservation {reservation.pk} is {missing} of {_units(total, hosts)} short from "
            f"{since:%Y-%m-%d %H:%M}"
        )
        if was_missing and missing < was_missing:
            message = f"Lease {lease.name} is still degraded: {short}."
            events.emit(EventKind.CHANGED, "lease", lease.pk, message, **scope)
        else:
            them = "them" if missing > 1 else "it"
            message = (
                f"Lease {lease.name} is degraded: {short}{because}; no free reservable capacity "
                f"can take {them}."
            )
            events.alert("lease", lease.pk, message, **scope)
        messages.append(message)
    elif was_missing and not missing:
        message = (
            f"Lease {lease.name}: reservation {reservation.pk} holds its "
            f"{_units(total, hosts)} again."
        )
        events.emit(EventKind.CHANGED, "lease", lease.pk, message, **scope)
        messages.append(message)
    return messages


def _settle(lease: Lease) -> None:
    """The lease is degraded while one of its live reservations misses capacity."""
    degraded = lease.reservations.filter(status__in=LIVE_RESERVATIONS, missing__gt=0).exists()
    if degraded == lease.degraded:
        return
    Lease.objects.filter(pk=lease.pk).update(degraded=degraded)
    lease.degraded = degraded
    if not degraded:
        events.emit(
            EventKind.CHANGED,
            "lease",
            lease.pk,
            f"Lease {lease.name} is no longer degraded: it holds all its capacity again.",
            **lease_scope(lease),
        )
