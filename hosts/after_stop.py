"""What follows a VM's stop besides stopping it, as the apps above hosts say (each registers a
``consequence(vm)`` from its ``AppConfig.ready()``; the pools app: a pool's VM goes back to its
pool, a stateless pool reverts its disk). The portal asks before a stop that has one (Shut down,
Power off) and the API's stop answers say it (``after_stop``): nothing is lost unannounced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class AfterStop:
    """What follows a stop: ``code`` stable for clients (``returned_to_pool``,
    ``returned_and_reverted``, ``reverted``), ``message`` in words for people."""

    code: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


consequences: list[Callable[[object], AfterStop | None]] = []


def register(consequence: Callable[[object], AfterStop | None]) -> None:
    if consequence not in consequences:
        consequences.append(consequence)


def after_stop(vm) -> AfterStop | None:
    """What follows ``vm``'s stop (read from the VM and its pool as loaded: no query when the
    caller selected its pool), or None when it only stops."""
    for consequence in consequences:
        found = consequence(vm)
        if found is not None:
            return found
    return None
