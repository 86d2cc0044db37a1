"""Does a lease fit? Free reservable capacity over its whole window, honouring affinity.

A reservation fits when, at every instant of its window, the reservable hosts have room for
every accepted overlapping reservation plus the new one. Usage only changes where an
allocation begins or ends, so the peak over the window is found by sweeping those instants:
it is the *peak*, not the sum of everything that overlaps (two back-to-back leases do not add
up). Whole-host reservations exclude everything else on their hosts for their window, and
instance reservations exclude whole-host ones: a host is never counted twice. VMs running on a
reservable host that no live allocation there accounts for (VMs outside any lease, a lease's VMs
beyond what it holds on that host) use its capacity for as long as they run: from now on, with
no end, so no lease is promised what they use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cached_property

from django.db.models import Q
from django.utils import timezone

from hosts.capacity import schedulable
from hosts.models import HOLDING_STATUSES, Host, HostStatus, VirtualMachine
from leases.models import Allocation, ResourceType
from leases.properties import matches
from leases.rooms import HostRoom, Slot
from leases.shortfall import Limit, hosts_short, instances_short
from leases.sizes import instance_count

# How long a VM outside the leases is counted on its host: for as long as it runs.
EVER = datetime.min.replace(tzinfo=UTC)
FOREVER = datetime.max.replace(tzinfo=UTC)


class DoesNotFit(Exception):
    """The request does not fit; the message says what is short. ``resource`` ("instances" or
    "hosts") is what runs short: ``available`` of the ``requested`` fit (all None when the
    refusal is not a shortage, as affinity with VMs on several hosts). ``explain`` finds why,
    in the resource that runs short (shortfall.py), when someone reads it: searches that try
    many windows (``earliest_fit``) only count the refusals."""

    def __init__(
        self,
        message: str,
        *,
        resource: str | None = None,
        requested: int | None = None,
        available: int | None = None,
        explain: Callable[[], Limit | None] | None = None,
    ) -> None:
        super().__init__(message)
        self.resource, self.requested, self.available = resource, requested, available
        self.explain = explain

    @cached_property
    def limit(self) -> Limit | None:
        return None if self.explain is None else self.explain()

    def __str__(self) -> str:
        message = self.args[0]
        return message if self.limit is None else f"{message} ({self.limit.text})"

    def short(self) -> dict | None:
        """What runs short, as the API reports it."""
        if self.resource is None:
            return None
        short = {
            "resource": self.resource,
            "requested": self.requested,
            "available": self.available,
        }
        if self.limit is not None:
            short["limit"] = self.limit.as_dict()
        return short


def lock_reservable_hosts() -> None:
    """Lock every reservable host's row, in id order, for the transaction: whatever plans or
    moves lease capacity takes this lock first (then the leases it changes), so planners take
    turns and never deadlock.

    FOR NO KEY UPDATE, as the sync: planners exclude one another (and a sync of the host), yet
    a job moving a VM onto one of these hosts checks its foreign key (FOR KEY SHARE) without
    waiting, so a planner that then waits for that VM's row (a migration it queues) cannot
    deadlock against it."""
    hosts = Host.objects.filter(reservable=True).order_by("pk")
    list(hosts.select_for_update(no_key=True).values("pk"))


def reservable_rooms(
    start: datetime, end: datetime, *, lock: bool, exclude_lease=None, leave_vms_of=None
):
    """Every reservable host with what accepted reservations, and VMs they do not account
    for, use of it around the window.

    With ``lock``, the reservable hosts' rows are locked (in id order, as
    ``lock_reservable_hosts``) for the transaction: capacity checks that could compete take
    turns, across processes and machines.
    ``exclude_lease`` leaves out a lease's allocations and VMs (it is being planned again),
    ``leave_vms_of`` a reservation's VMs (the caller places capacity for them).
    """
    hosts = Host.objects.filter(reservable=True).select_related("cluster").order_by("pk")
    if lock:
        hosts = hosts.select_for_update(of=("self",), no_key=True)
    rooms = {}
    for host in hosts:
        capacity = schedulable(host.cluster, host.cpus or 0, host.memory_mb or 0)
        rooms[host.pk] = HostRoom(
            host=host,
            cpus=capacity.vcpus,
            memory_mb=capacity.memory_mb,
            disk_bytes=host.storage_free_bytes,
        )
    allocations = Allocation.objects.live(start, end).filter(host_id__in=list(rooms))
    if exclude_lease is not None:
        allocations = allocations.exclude(reservation__lease=exclude_lease)
    # Plain values: a year of reservations overlaps a long window by a thousand rows, and
    # making three model instances of each would cost more than the whole plan.
    rows = allocations.values_list(
        "host_id",
        "slots",
        "whole_host",
        "reservation__vcpus",
        "reservation__memory_mb",
        "reservation__lease__start_date",
        "reservation__lease__end_date",
        "reservation__disk_gb",
    )
    for host_id, slots, whole, vcpus, memory_mb, lease_start, lease_end, disk_gb in rows:
        rooms[host_id].usage.append(
            Slot(
                start=lease_start,
                end=lease_end,
                vcpus=(vcpus or 0) * slots,
                memory_mb=(memory_mb or 0) * slots,
                whole_host=whole,
                disk_gb=(disk_gb or 0) * slots,
            )
        )
    _count_outside_use(rooms, exclude_lease, leave_vms_of)
    return rooms


def _count_outside_use(rooms: dict[int, HostRoom], exclude_lease, leave_vms_of) -> None:
    """Add the VMs holding (or arriving on) each host beyond what live allocations there hold
    for them, as use with no end."""
    hosts = list(rooms)
    vms = VirtualMachine.objects.filter(
        Q(host_id__in=hosts, status__in=HOLDING_STATUSES) | Q(migrating_to_id__in=hosts)
    )
    if exclude_lease is not None:
        vms = vms.exclude(reservation__lease=exclude_lease)
    if leave_vms_of is not None:
        vms = vms.exclude(reservation_id=leave_vms_of)
    rows = list(
        vms.order_by("pk").values_list(
            "host_id", "migrating_to_id", "status", "reservation_id", "vcpus", "memory_mb"
        )
    )
    if not rows:
        return
    reservations = {row[3] for row in rows if row[3] is not None}
    covering: dict[tuple[int, int], float] = {}
    if reservations:
        held = (
            Allocation.objects.live(timezone.now())
            .filter(reservation_id__in=reservations, host_id__in=hosts)
            .values_list("reservation_id", "host_id", "slots", "whole_host")
        )
        for reservation_id, host_id, slots, whole in held:
            covering[(reservation_id, host_id)] = float("inf") if whole else slots
    for host_id, arriving_on, status, reservation_id, vcpus, memory_mb in rows:
        places = [host_id] if host_id in rooms and status in HOLDING_STATUSES else []
        if arriving_on in rooms and arriving_on != host_id:
            places.append(arriving_on)
        for place in places:
            if covering.get((reservation_id, place), 0) >= 1:
                covering[(reservation_id, place)] -= 1
                continue
            rooms[place].usage.append(
                Slot(EVER, FOREVER, vcpus or 0, memory_mb or 0, whole_host=False)
            )


def plan_instances(rooms: dict[int, HostRoom], start, end, request: dict) -> list[tuple[int, int]]:
    """Where ``amount`` instances go: [(host id, slots)], or DoesNotFit saying what is short.

    ``request["keep"]`` ({host id: instances}) names hosts where the reservation's VMs run
    already: their slots stay there when the host can still hold them, and only the rest is
    planned anew (a change never moves capacity away from running VMs). With affinity, the
    whole amount stays on the (Up) host running the VMs, or DoesNotFit.
    """
    amount, affinity = request["amount"], request.get("affinity")
    usable = [
        room
        for room in rooms.values()
        if room.host.status == HostStatus.UP and matches(room.host, request.get("host_properties"))
    ]
    free = {
        room.host.pk: room.free_slots(
            start, end, request["vcpus"], request["memory_mb"], request.get("disk_gb") or 0
        )
        for room in usable
    }

    def explain():
        return instances_short(rooms, start, end, request)

    kept = {
        host: min(count, free[host], amount)
        for host, count in (request.get("keep") or {}).items()
        if free.get(host, 0) > 0 and count > 0
    }
    if kept and affinity is not True:
        held = sum(kept.values())
        if held > amount:
            kept, held = _trim(kept, amount), amount
        rest = {**request, "amount": amount - held, "keep": None}
        others = {h: r for h, r in rooms.items() if h not in kept or affinity is None}
        for host, count in kept.items():
            if host in others:
                free[host] -= count
        if rest["amount"] == 0:
            return sorted(kept.items())
        if affinity is None:
            ranked = sorted(
                ((h, s) for h, s in free.items() if s > 0), key=lambda item: (-item[1], item[0])
            )
            return _merge(kept, _fill(ranked, rest["amount"], amount - held, start, end, explain))
        return _merge(kept, plan_instances(others, start, end, rest))
    if affinity is True:
        # The reservation's VMs already run on one host: the whole amount stays with them.
        # Moving it would leave those VMs holding capacity that no allocation accounts for.
        running = sorted(host for host, count in (request.get("keep") or {}).items() if count)
        running = [host for host in running if host in free]  # a failed host lets go
        if len(running) > 1:
            raise DoesNotFit(f"its VMs run on {len(running)} hosts, and affinity keeps them on one")
        if running:
            (host,) = running
            if free[host] < amount:
                raise DoesNotFit(
                    f"only {free[host]} of {instance_count(amount)} fit on the host running "
                    f"its VMs between {start:%Y-%m-%d %H:%M} and {end:%Y-%m-%d %H:%M}",
                    **_instances(amount, free[host]),
                    explain=lambda: instances_short(
                        rooms, start, end, request, on=host, running=True
                    ),
                )
            return [(host, amount)]
    ranked = sorted(free.items(), key=lambda item: (-item[1], item[0]))
    if affinity is True:
        best = ranked[0][1] if ranked else 0
        if best < amount:
            freest = ranked[0][0] if ranked else None
            raise DoesNotFit(
                f"only {best} of {instance_count(amount)} fit on one host between "
                f"{start:%Y-%m-%d %H:%M}"
                f" and {end:%Y-%m-%d %H:%M}",
                **_instances(amount, best),
                explain=lambda: instances_short(rooms, start, end, request, on=freest),
            )
        return [(ranked[0][0], amount)]
    if affinity is False:
        hosts = [host for host, slots in ranked if slots >= 1]
        if len(hosts) < amount:
            raise DoesNotFit(
                f"only {len(hosts)} of {instance_count(amount)} fit on distinct hosts between "
                f"{start:%Y-%m-%d %H:%M} and {end:%Y-%m-%d %H:%M}",
                **_instances(amount, len(hosts)),
                explain=explain,
            )
        return [(host, 1) for host in hosts[:amount]]
    return _fill(ranked, amount, amount, start, end, explain)


def _instances(requested: int, available: int) -> dict:
    return {"resource": "instances", "requested": requested, "available": available}


def _fill(ranked, needed: int, total: int, start, end, explain) -> list[tuple[int, int]]:
    """Take ``needed`` slots from hosts in order; DoesNotFit names the shortage of ``total``."""
    chosen, left = [], needed
    for host, slots in ranked:
        if left == 0:
            break
        take = min(slots, left)
        if take:
            chosen.append((host, take))
            left -= take
    if left:
        raise DoesNotFit(
            f"only {total - left} of {instance_count(total)} fit between {start:%Y-%m-%d %H:%M} "
            f"and {end:%Y-%m-%d %H:%M}",
            **_instances(total, total - left),
            explain=explain,
        )
    return chosen


def _trim(kept: dict[int, int], amount: int) -> dict[int, int]:
    trimmed, left = {}, amount
    for host, count in sorted(kept.items(), key=lambda item: (-item[1], item[0])):
        take = min(count, left)
        if take:
            trimmed[host] = take
            left -= take
    return trimmed


def _merge(kept: dict[int, int], more: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged = dict(kept)
    for host, count in more:
        merged[host] = merged.get(host, 0) + count
    return sorted(merged.items())


def plan_hosts(rooms: dict[int, HostRoom], start, end, request: dict) -> list[int]:
    """Which whole hosts to reserve (between ``min`` and ``max``), or DoesNotFit."""
    keep = request.get("keep") or {}
    candidates = sorted(
        (
            room.host.pk
            for room in rooms.values()
            if room.host.status == HostStatus.UP
            and matches(room.host, request.get("host_properties"))
            and room.entirely_free(start, end)
        ),
        key=lambda host: (host not in keep, host),  # hosts running the lease's VMs first
    )
    if len(candidates) < request["min"]:
        raise DoesNotFit(
            f"only {len(candidates)} of {request['min']} hosts with those properties are free "
            f"between {start:%Y-%m-%d %H:%M} and {end:%Y-%m-%d %H:%M}",
            resource="hosts",
            requested=request["min"],
            available=len(candidates),
            explain=lambda: hosts_short(
                rooms, request.get("host_properties") or {}, request["min"], start, end
            ),
        )
    return candidates[: request["max"]]


def plan(start, end, requests: list[dict], *, lock: bool, exclude_lease=None):
    """Allocations for every reservation of a lease, in order, each counting the previous
    ones: [(request, [(host id, slots, whole_host)])]. DoesNotFit if any does not fit."""
    rooms = reservable_rooms(start, end, lock=lock, exclude_lease=exclude_lease)
    return plan_in(rooms, start, end, requests)


def plan_in(rooms: dict[int, HostRoom], start, end, requests: list[dict]):
    """``plan`` on rooms already read (``rooms`` themselves are left as they were)."""
    rooms = {pk: replace(room, usage=list(room.usage)) for pk, room in rooms.items()}
    planned = []
    for index, request in enumerate(requests):
        try:
            if request["resource_type"] == ResourceType.HOST:
                chosen = [(host, 0, True) for host in plan_hosts(rooms, start, end, request)]
            else:
                chosen = [
                    (host, slots, False)
                    for host, slots in plan_instances(rooms, start, end, request)
                ]
        except DoesNotFit as exc:
            prefix = f"reservation {index + 1}: " if len(requests) > 1 else ""
            raise DoesNotFit(
                prefix + exc.args[0],
                resource=exc.resource,
                requested=exc.requested,
                available=exc.available,
                explain=exc.explain,
            ) from None
        for host, slots, whole in chosen:
            rooms[host].usage.append(
                Slot(
                    start=start,
                    end=end,
                    vcpus=(request.get("vcpus") or 0) * slots,
                    memory_mb=(request.get("memory_mb") or 0) * slots,
                    whole_host=whole,
                    disk_gb=(request.get("disk_gb") or 0) * slots,
                )
            )
        planned.append((request, chosen))
    return planned


def earliest_fit(
    start: datetime, end: datetime, requests: list[dict], *, within: timedelta
) -> tuple[datetime, datetime] | None:
    """The earliest window as long as [start, end) where every reservation fits, starting
    after ``start`` and at most ``within`` later; None if there is none.

    Free capacity only grows where an allocation ends, so those instants are the only starts
    to try, in order, each with the planner itself (``plan_in``). The capacity is read once,
    over the whole span searched: a fixed number of queries, however many leases there are.
    """
    duration = end - start
    latest = start + within
    rooms = reservable_rooms(start, latest + duration, lock=False)
    candidates = sorted(
        {slot.end for room in rooms.values() for slot in room.usage if start < slot.end <= latest}
    )
    for moment in candidates:
        try:
            plan_in(rooms, moment, moment + duration, requests)
        except DoesNotFit:
            continue
        return moment, moment + duration
    return None
