"""The lease events loop: leases start and end on time (missed events too, after downtime),
checked on every tick of the ticker."""

from __future__ import annotations

from leases import lifecycle
from project import loops


def register() -> None:
    loops.register("lease-events", lifecycle.run_due_events)
