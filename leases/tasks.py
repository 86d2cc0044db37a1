"""The leases' loops: lease events carried out on time (missed ones too, after downtime), on
every tick of the ticker; and, every ``LEASE_REPAIR_INTERVAL`` seconds, every lease short of
capacity (or holding some on a host that gave it up) repaired, whatever change was missed."""

from __future__ import annotations

from django.conf import settings

from leases import lifecycle, repair
from project import loops


def register() -> None:
    loops.register("lease-events", lifecycle.run_due_events)
    loops.register("lease-repair", repair.make_whole, every=lambda: settings.LEASE_REPAIR_INTERVAL)
