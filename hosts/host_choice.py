"""The choice of a host for a VM: one scheduling decision per cluster at a time, by a pluggable
provider.

``decision(cluster_id)`` is a transaction holding the cluster's row lock — the scheduling lock,
which works across processes and machines. Inside it a caller asks ``place()`` for hosts and
records its choice (the VM Starting on its host, or ``migrating_to`` a destination), so every
later decision counts that VM as a pending resource of the host. Acquiring the lock gives up
after ``CORRAL_SCHEDULER_LOCK_TIMEOUT`` seconds on PostgreSQL, and a holder that hangs loses
it after ``CORRAL_SCHEDULER_LOCK_HOLD_TIMEOUT``; nothing slow (libvirt, hooks) ever runs while
it is held.

Which hosts fit, and in what order, is the provider's answer: the scheduling app
registers its scheduler (``set_provider``) when it is ready. ``Decision`` and
``NoHostAvailable`` are the provider's vocabulary.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction

from hosts.models import Cluster, Host, HostStatus, VirtualMachine, VmStatus
from hosts.sync import sync_host

__all__ = [
    "Decision",
    "NoHostAvailable",
    "SchedulerBusy",
    "add_after_decision",
    "deciding",
    "decision",
    "place",
    "set_provider",
    "wait_for_pending",
]

logger = logging.getLogger(__name__)


class NoHostAvailable(Exception):
    """No host can run the VM; ``explanation`` says why, unit by unit."""

    def __init__(self, message: str, explanation: dict):
        super().__init__(message)
        self.message = message
        self.explanation = explanation


class SchedulerBusy(NoHostAvailable):
    pass


@dataclass
class Decision:
    """The hosts able to run the VM, best first, and why.

    Host rows are loaded when first asked for: most callers want only the best one.
    """

    host_ids: list[int]
    explanation: dict[str, Any] = field(default_factory=dict)
    loaded: dict[int, Host] = field(default_factory=dict, repr=False)

    @property
    def host(self) -> Host:
        return self._load(self.host_ids[:1])[0]

    @property
    def hosts(self) -> list[Host]:
        return self._load(self.host_ids)

    def _load(self, ids: list[int]) -> list[Host]:
        missing = [pk for pk in ids if pk not in self.loaded]
        if missing:
            self.loaded.update(Host.objects.in_bulk(missing))
        return [self.loaded[pk] for pk in ids]


# provider(vm, purpose=..., hosts=...) -> Decision, or NoHostAvailable.
Provider = Callable[..., Decision]
_provider: list[Provider] = []


def set_provider(provider: Provider) -> None:
    """Make ``provider`` the one that chooses hosts (the scheduler, from its app's ready())."""
    _provider[:] = [provider]


# Run after each decision's transaction ended, committed or rolled back (the scheduling app
# records there what its units did: a failure streak's alert must outlive a decision that
# found no host, and is no reason to hold the lock longer).
_after_decision: list[Callable[[], None]] = []
_inside = threading.local()


def add_after_decision(callback: Callable[[], None]) -> None:
    """Call ``callback()`` after every ``decision()`` ends, outside its transaction."""
    if callback not in _after_decision:
        _after_decision.append(callback)


def deciding() -> bool:
    """Whether this thread is inside a ``decision()``."""
    return getattr(_inside, "depth", 0) > 0


class decision:  # noqa: N801 (used as a context manager)
    """A transaction holding the cluster's scheduling lock."""

    def __init__(self, cluster_id: int):
        self._atomic = transaction.atomic()
        self._cluster_id = cluster_id

    def __enter__(self):
        _inside.depth = getattr(_inside, "depth", 0) + 1
        try:
            return self._lock()
        except BaseException:
            _inside.depth -= 1
            raise

    def _lock(self):
        self._atomic.__enter__()
        postgres = connection.vendor == "postgresql"
        try:
            if postgres:
                acquire_ms = int(settings.CORRAL_SCHEDULER_LOCK_TIMEOUT * 1000)
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL lock_timeout = {acquire_ms}")
            Cluster.objects.select_for_update().filter(pk=self._cluster_id).first()
            if postgres:
                # Only once the lock is ours (a shorter statement timeout would cut the wait
                # for it short): a holder that hangs, idle in its transaction or stuck in a
                # statement, loses its session and with it the lock.
                hold_ms = int(settings.CORRAL_SCHEDULER_LOCK_HOLD_TIMEOUT * 1000)
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL idle_in_transaction_session_timeout = {hold_ms}")
                    cursor.execute(f"SET LOCAL statement_timeout = {hold_ms}")
        except OperationalError as exc:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise SchedulerBusy(
                "The cluster's scheduler stayed busy; try again in a moment.", {}
            ) from exc
        return self

    def __exit__(self, *exc):
        try:
            return self._atomic.__exit__(*exc)
        finally:
            _inside.depth -= 1
            if not deciding():
                for callback in _after_decision:
                    try:
                        callback()
                    except Exception:  # never the decision's outcome
                        logger.exception("an after-decision callback failed")


def place(
    vm: VirtualMachine, *, purpose: str = "start", hosts: list[Host] | None = None
) -> Decision:
    """Hosts for ``vm``, best first (call inside ``decision()``)."""
    if not _provider:
        raise RuntimeError("No placement provider is registered (is the scheduling app on?).")
    return _provider[0](vm, purpose=purpose, hosts=hosts)


def wait_for_pending(vm: VirtualMachine) -> bool:
    """Wait (bounded) until the cluster settles; False if there was nothing to wait for.

    When filtering left no host, resources promised to VMs still starting may soon be known
    better (a start that fails frees its host), and hosts still Connecting (just added, not
    yet read) may soon be Up; the scheduler spec retries once after that.
    """
    pending = VirtualMachine.objects.filter(
        cluster_id=vm.cluster_id, status=VmStatus.STARTING
    ).exclude(pk=vm.pk)
    connecting = Host.objects.filter(cluster_id=vm.cluster_id, status=HostStatus.CONNECTING)
    if not pending.exists() and not connecting.exists():
        return False
    for host_id in connecting.values_list("pk", flat=True):
        # Read new hosts now rather than wait for the ticker (whose worker may be busy).
        sync_host(host_id)
    deadline = time.monotonic() + settings.CORRAL_PENDING_WAIT
    while (pending.exists() or connecting.exists()) and time.monotonic() < deadline:
        time.sleep(0.25)
    return True
