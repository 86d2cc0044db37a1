"""Hosts shared out among task clusters: each one syncs the hosts it holds a lease on.

A task cluster that syncs is a *member*: it announces itself with a heartbeat row (a loop lock
named ``syncer-<member>``, renewed every round, that expires when it stops). Each round a
member takes its fair share of the hosts — the hosts to sync divided by the live members,
rounded up — by claiming hosts nobody holds (``Host.sync_owner`` empty or its
``sync_lease_until`` past) with a conditional UPDATE, and gives back what it holds beyond its
share. Conditional UPDATEs make a claim atomic on PostgreSQL and SQLite alike, so two members
never hold one host; a member renews its leases before they run out, and the sync of a host
writes only while its member still holds it (``owner`` of ``hosts.sync.sync_host``). A member
that dies stops renewing: its heartbeat row and its leases expire after one lease time, and
the others claim its hosts in their next round.
"""

from __future__ import annotations

import math
import random
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from hosts.models import Host, HostStatus
from project import loops
from project.models import LoopLock

MEMBER = "syncer-"


def _update_unheld(hosts: QuerySet, **values) -> int:
    """UPDATE the rows of ``hosts`` that no one holds now; how many.

    The rows are locked first in id order, skipping those a lease planner or a host's sync
    holds (they are seen to in a later round): a many-row UPDATE that waited on them would
    lock in its own order and could deadlock against a planner locking the reservable hosts
    in id order.
    """
    if connection.vendor != "postgresql":
        return hosts.update(**values)  # one writer at a time: no row locks, no deadlock
    with transaction.atomic():
        ids = list(
            hosts.order_by("pk")
            .select_for_update(skip_locked=True, no_key=True)
            .values_list("pk", flat=True)
        )
        return hosts.filter(pk__in=ids).update(**values) if ids else 0


def announce(member: str, holder: str, ttl: float) -> bool:
    """Be (or stay) the syncing member ``member`` for ``ttl`` seconds; False if another
    process of the member holds it."""
    return loops.acquire(f"{MEMBER}{member}", holder, ttl)


def retire(member: str, holder: str) -> None:
    """Leave: the member's heartbeat row and its hosts, for the others to take at once."""
    loops.release(f"{MEMBER}{member}", holder)
    _update_unheld(Host.objects.filter(sync_owner=member), sync_owner="", sync_lease_until=None)


def live_members() -> int:
    """The members whose heartbeat row has not expired."""
    now = timezone.now()
    return LoopLock.objects.filter(name__startswith=MEMBER, expires_at__gte=now).count()


def _syncable():
    return Host.objects.exclude(status=HostStatus.MAINTENANCE)


def claim_share(member: str, lease: float) -> dict[int, str]:
    """Hold the member's fair share of the hosts for ``lease`` seconds; returns the hosts it
    holds now ({id: uri}).

    Leases with less than half their time left are renewed; hosts beyond the share are given
    back; free hosts (never held, or their lease past) are claimed up to the share, picked at
    random so that members claiming at once rarely want the same ones.
    """
    now = timezone.now()
    until = now + timedelta(seconds=lease)
    _update_unheld(
        Host.objects.filter(
            sync_owner=member, sync_lease_until__lt=now + timedelta(seconds=lease / 2)
        ),
        sync_lease_until=until,
    )
    held = dict(_syncable().filter(sync_owner=member).order_by("pk").values_list("pk", "uri"))
    share = math.ceil(_syncable().count() / max(1, live_members()))
    if len(held) > share:
        extra = list(held)[share:]
        _update_unheld(
            Host.objects.filter(pk__in=extra, sync_owner=member),
            sync_owner="",
            sync_lease_until=None,
        )
        held = dict(_syncable().filter(sync_owner=member).order_by("pk").values_list("pk", "uri"))
    elif len(held) < share:
        free = Q(sync_owner="") | Q(sync_lease_until__lt=now) | Q(sync_lease_until__isnull=True)
        candidates = list(_syncable().filter(free).values_list("pk", flat=True))
        wanted = random.sample(candidates, min(len(candidates), share - len(held)))
        if wanted:
            # Conditional: a host another member claimed since it was read is not taken.
            _update_unheld(
                Host.objects.filter(free, pk__in=wanted), sync_owner=member, sync_lease_until=until
            )
            held = dict(
                _syncable().filter(sync_owner=member).order_by("pk").values_list("pk", "uri")
            )
    return held


def mark_seen(member: str, host_ids: list[int]) -> int:
    """One write for the hosts the member found Up since the last one: their ``last_seen_at``
    (a host's own sync writes nothing when its report is unchanged)."""
    if not host_ids:
        return 0
    now = timezone.now()
    return _update_unheld(
        Host.objects.filter(pk__in=host_ids, sync_owner=member, status=HostStatus.UP),
        last_seen_at=now,
    )
