"""The event feed (XAPI's event.from): append an event, read what changed since a token.

Readers wait up to a timeout when nothing new has happened. On PostgreSQL a committed event
sends NOTIFY and one LISTEN thread per process wakes every waiting reader at once; on SQLite
readers poll.

An id is taken at insert, before commit, so on PostgreSQL a long transaction can commit an id
below one already committed. Readers never pass the horizon (migration 0005): the highest id
no transaction still open holds, so no event appears behind a token once handed out. SQLite
has a single writer, so its ids commit in order.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from project.access.permissions import grant_condition
from project.live.event_scopes import event_keys
from project.models import Event, EventKind

logger = logging.getLogger(__name__)
CHANNEL = "corral_events"
POLL_INTERVAL_S = 0.25

# Which action lets a user see events about each kind of object: registered by the app that
# owns the kind (``register_object_type`` from its ``AppConfig.ready()``).
VIEW_ACTIONS: dict[str, str] = {}


def register_object_type(object_type: str, view_action: str) -> None:
    """Events about ``object_type`` objects are seen by whoever holds ``view_action`` on them."""
    VIEW_ACTIONS[object_type] = view_action


def emit(
    kind: str,
    object_type: str,
    object_id: int | None,
    message: str = "",
    data: dict | None = None,
    **scope,
) -> Event:
    """Append an event (inside the caller's transaction; readers see it when it commits).

    ``scope`` names what the event belongs to: vm_id, cluster_id, pool_id, lease_id, user_id.
    """
    event = Event.objects.create(
        kind=kind,
        object_type=object_type,
        object_id=object_id,
        message=message[:500],
        data=data or {},
        scope_keys=event_keys(scope),
        **scope,
    )
    if connection.vendor == "postgresql":
        transaction.on_commit(_notify)
    return event


def emit_many(rows: list[dict]) -> list[Event]:
    """Append several events in one insert (each row: emit()'s arguments by name)."""
    made = Event.objects.bulk_create(
        Event(**{**row, "message": row["message"][:500], "scope_keys": event_keys(row)})
        for row in rows
    )
    if made and connection.vendor == "postgresql":
        transaction.on_commit(_notify)
    return made


def alert(object_type: str, object_id: int | None, message: str, **scope) -> Event:
    logger.warning("alert: %s", message)
    return emit(EventKind.ALERT, object_type, object_id, message, **scope)


def _notify() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"NOTIFY {CHANNEL}")


def visible_events(user) -> QuerySet:
    """Events about objects ``user`` may see, plus those that concern the user directly."""
    if user.is_superuser:
        return Event.objects.all()
    condition = Q(user_id=user.pk)
    for object_type, action in VIEW_ACTIONS.items():
        condition |= Q(object_type=object_type) & grant_condition(Event, user, action)
    return Event.objects.filter(condition)


def horizon() -> int | None:
    """The highest event id a reader may pass (None: any). Read before the events themselves:
    an event committed after this read is above it or was already counted."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT project_event_horizon()")
        return cursor.fetchone()[0]


def below_horizon(queryset: QuerySet) -> QuerySet:
    """``queryset`` of events without those a reader may not pass yet (``horizon``)."""
    bound = horizon()
    return queryset if bound is None else queryset.filter(id__lte=bound)


def latest_token() -> int:
    """Where a reader starts to get what happens from now on (never past an event to come)."""
    latest = below_horizon(Event.objects.order_by("-id")).values_list("id", flat=True).first()
    return latest or 0


def older_than_the_feed(since: int) -> bool:
    """Whether events after ``since`` may have been pruned: a reader resuming there must reload
    what it shows. 0 asks for everything retained and never is."""
    if since <= 0:
        return False
    first = Event.objects.order_by("id").values_list("id", flat=True).first()
    return first is not None and since < first - 1


def read_since(user, since: int, timeout: float, limit: int = 500) -> list[Event]:
    """Events after ``since`` that ``user`` may see, waiting up to ``timeout`` seconds for one.

    Never past an id that a transaction still open may yet commit (see the module docstring).
    """
    deadline = time.monotonic() + max(0.0, timeout)
    # A read that will not wait needs no LISTEN connection (an ASGI process has its hub's).
    waits = timeout > 0 and connection.vendor == "postgresql"
    listener = _listener() if waits else None
    while True:
        generation = listener.generation if listener else 0
        found = below_horizon(visible_events(user).filter(id__gt=since))
        events = list(found.order_by("id")[:limit])
        remaining = deadline - time.monotonic()
        if events or remaining <= 0:
            return events
        if listener is not None:
            listener.wait(generation, min(remaining, 5.0))
        else:
            time.sleep(min(remaining, POLL_INTERVAL_S))


# Events deleted per statement when pruning: a backlog goes in short transactions.
PRUNE_BATCH = 5000


def prune(older_than: timedelta | None = None) -> int:
    """Delete events older than the retention (settings.CORRAL_EVENT_RETENTION_HOURS); how many.

    What goes is always a prefix of the feed (every id below the first one kept), so the
    oldest id retained says exactly who may have missed something (``older_than_the_feed``). Kept
    whatever their age: the newest event (a reader at the head never has to resync) and
    anything above the horizon (a transaction still open may yet commit below it).
    """
    older_than = older_than or timedelta(hours=settings.CORRAL_EVENT_RETENTION_HOURS)
    recent = Event.objects.filter(created_at__gte=timezone.now() - older_than)
    first_kept = recent.order_by("id").values_list("id", flat=True).first()
    newest = Event.objects.order_by("-id").values_list("id", flat=True).first()
    if newest is None:
        return 0
    first_kept = min(first_kept or newest, newest)
    bound = horizon()
    if bound is not None:
        first_kept = min(first_kept, bound + 1)
    deleted = 0
    start = Event.objects.order_by("id").values_list("id", flat=True).first()
    while start is not None and start < first_kept:
        upto = min(start + PRUNE_BATCH, first_kept)
        gone, _ = Event.objects.filter(id__gte=start, id__lt=upto).delete()
        deleted += gone
        start = upto
    return deleted


class _Listener:
    """One LISTEN connection per process; every NOTIFY bumps ``generation`` and wakes waiters."""

    def __init__(self) -> None:
        self.generation = 0
        self._condition = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="corral-event-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    def wait(self, generation: int, timeout: float) -> None:
        with self._condition:
            if self.generation == generation:
                self._condition.wait(timeout)

    def _bump(self) -> None:
        with self._condition:
            self.generation += 1
            self._condition.notify_all()

    def _run(self) -> None:
        import psycopg

        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        while not self._stopping.is_set():
            try:
                with psycopg.connect(**params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._bump()  # anything may have been missed while (re)connecting
                    while not self._stopping.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self._bump()
            except Exception:
                logger.exception("event listener lost its connection; reconnecting")
                self._stopping.wait(1)


_listener_lock = threading.Lock()
_listener_instance: _Listener | None = None


def stop_listener() -> None:
    """Close this process's LISTEN connection (before dropping a database, at shutdown)."""
    global _listener_instance
    with _listener_lock:
        listener, _listener_instance = _listener_instance, None
    if listener is not None:
        listener.stop()


def _listener() -> _Listener:
    global _listener_instance
    with _listener_lock:
        if _listener_instance is None:
            _listener_instance = _Listener()
        return _listener_instance
