"""Calling policy units: built-in ones directly, user-written ones with a time limit, and what
their failures leave behind (a failure streak on the unit's row, one alert when it begins).

A unit *fails* a decision when it raises, answers in the wrong shape, cannot be loaded, or —
user-written units only — does not answer within ``CORRAL_SCHEDULING_UNIT_TIMEOUT`` seconds.
What a failure means is the caller's business (the scheduler: a filter keeps or drops every
host, per the unit's ``on_failure``; a weight is neutral; the balancer moves nothing).

**Why a thread, not a subprocess.** User-written units are code the site installs (listed in
settings, not uploaded by users), so the limit is about liveness, not isolation. A unit reads
the decision's snapshot as Python objects; a subprocess would have to pickle it and, to find
the unit, import Django and the site's code on every call (a fork of a task worker, with its
database connections and libvirt event thread, is not safe), on the hot path of every
placement, under the cluster's scheduling lock. A thread costs a fraction of a millisecond.
Its price: Python cannot stop a thread, so a unit that hangs keeps its thread (and whatever it
holds) until it returns or the process ends. The pile-up is bounded: while a unit's call is
still running past its limit, that unit is not called again in this process (it fails at once),
so each process holds at most one hung thread per user-written unit. The threads are daemons:
they never keep a process from exiting (a task cluster's worker still recycles). A unit gets
its own copy of the hosts and the context, so an answer that comes late cannot change the
decision that went on without it.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from hosts import host_choice
from project import events
from project.models import EventKind
from scheduling import registry
from scheduling.models import OnFailure, PolicyUnit

logger = logging.getLogger(__name__)


class UnitFailed(Exception):
    """A unit failed this call; the message says how, for the decision's explanation."""


@dataclass
class _Hung:
    thread: threading.Thread
    since: float


# Unit name -> its call still running past the limit, in this process.
_hung: dict[str, _Hung] = {}
_hung_lock = threading.Lock()


def hung_units() -> list[str]:
    """The user-written units whose call is still running past its limit, in this process."""
    with _hung_lock:
        return sorted(name for name, hung in _hung.items() if hung.thread.is_alive())


def _check_answer(method: str, answer) -> None:
    """A unit answers {host id: reason} (filter) or {host id: number} (score), or None."""
    if answer is None or method == "balance":
        return
    if not isinstance(answer, dict):
        raise TypeError(f"{method}() returned {type(answer).__name__}, not a dict")
    if method == "score":
        for value in answer.values():
            if isinstance(value, bool) or not isinstance(value, Real):
                raise TypeError(f"score() returned {type(value).__name__} for a host, not a number")


def _within_limit(unit: PolicyUnit, method, args: tuple):
    """Run a user-written unit's method on a thread of its own; wait at most the limit."""
    limit = settings.CORRAL_SCHEDULING_UNIT_TIMEOUT
    with _hung_lock:
        hung = _hung.get(unit.name)
        if hung is not None and hung.thread.is_alive():
            raise UnitFailed(
                f"its call of {time.monotonic() - hung.since:.0f} s ago has not returned yet"
            )
        _hung.pop(unit.name, None)
    args = copy.deepcopy(args)
    outcome: dict[str, Any] = {}
    answered = threading.Event()

    def call() -> None:
        try:
            outcome["answer"] = method(*args)
        except BaseException as exc:  # reported as the unit's failure
            outcome["error"] = exc
        finally:
            answered.set()
            connections.close_all()  # this thread's own, should the unit have queried

    thread = threading.Thread(target=call, name=f"policy-unit-{unit.name}", daemon=True)
    started = time.monotonic()
    thread.start()
    if not answered.wait(limit):
        with _hung_lock:
            _hung[unit.name] = _Hung(thread, started)
        raise UnitFailed(f"it did not answer within {limit:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["answer"]


@dataclass
class UnitCalls:
    """The unit calls of one decision (or balancer run), and what they leave behind."""

    cluster_id: int | None
    subject: str  # "placing VM web-1", "balancing cluster lab"
    failed: dict[int, tuple[PolicyUnit, str, str]] = field(default_factory=dict)
    answered: dict[int, PolicyUnit] = field(default_factory=dict)

    def run(self, unit: PolicyUnit, method: str, *args):
        """The unit's answer; UnitFailed when it fails (which is remembered for ``record``)."""
        try:
            implementation = registry.load(unit)
            bound = getattr(implementation, method)
            answer = bound(*args) if unit.internal else _within_limit(unit, bound, args)
            _check_answer(method, answer)
        except Exception as exc:  # a broken unit is reported, never fatal to the decision
            error = str(exc) or type(exc).__name__
            if not isinstance(exc, UnitFailed):
                logger.error("scheduling unit %s failed: %s", unit.name, error, exc_info=exc)
            self.failed[unit.pk] = (unit, method, error)
            raise UnitFailed(error) from exc
        self.answered[unit.pk] = unit
        return answer

    def settle(self) -> None:
        """Record what the calls left behind: now, or once the scheduling lock is released
        when inside a decision (``hosts.host_choice.decision``)."""
        if host_choice.deciding():
            pending = getattr(_pending, "calls", None)
            if pending is None:
                pending = _pending.calls = []
            pending.append(self)
        else:
            self.record()

    def record(self) -> None:
        """Start a failure streak (with its one alert) for each unit that failed and was not
        failing; end it for each that answered and was. The unit rows were read with the
        decision, so a decision where nothing changes writes nothing; a conditional update
        makes one process, one decision, raise each alert."""
        now = timezone.now()
        for unit, method, error in self.failed.values():
            if unit.failing_since is not None:
                continue
            began = PolicyUnit.objects.filter(pk=unit.pk, failing_since__isnull=True).update(
                failing_since=now, failure=error[:2000]
            )
            if began:
                events.alert(
                    "policyunit",
                    unit.pk,
                    f"Policy unit {unit.name} failed while {self.subject}: {error}. "
                    f"{consequence(unit, method)}; no further alert while it keeps failing.",
                    cluster_id=self.cluster_id,
                )
        for unit in self.answered.values():
            if unit.failing_since is None or unit.pk in self.failed:
                continue
            ended = PolicyUnit.objects.filter(pk=unit.pk, failing_since__isnull=False).update(
                failing_since=None, failure=""
            )
            if ended:
                events.emit(
                    EventKind.CHANGED,
                    "policyunit",
                    unit.pk,
                    f"Policy unit {unit.name} answers again (while {self.subject}).",
                    cluster_id=self.cluster_id,
                )


def consequence(unit: PolicyUnit, method: str) -> str:
    """What a failure of ``unit``'s ``method`` does to the decisions it takes part in."""
    if method == "filter":
        if unit.on_failure == OnFailure.DROP:
            return "Until it answers again its filter drops every host: nothing is placed"
        return "Until it answers again its filter is skipped: every host is kept"
    if method == "score":
        return "Until it answers again its weight is left out (neutral)"
    return "Until it answers again it moves no VM"


_pending = threading.local()


def record_pending() -> None:
    """After a decision (``hosts.host_choice.add_after_decision``): record the calls it made."""
    pending = getattr(_pending, "calls", None) or []
    _pending.calls = []
    for calls in pending:
        calls.record()
