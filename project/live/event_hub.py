"""Live readers of the event feed in an ASGI process: one listener, many waiting coroutines.

One task per process follows the feed (PostgreSQL: LISTEN on its own async connection, and a
read every few seconds in any case; SQLite: a read every POLL_INTERVAL_S) and reads each new
batch of events once, below the horizon (project/events.py). It keeps the latest events in
memory and wakes only the readers entitled to one of them, by matching scope keys
(project/live/event_scopes.py): no permission query per wake. A reader's keys come from its grants
when it opens and again every KEYS_TTL_S.

The hub starts with the newest KEEP_IN_MEMORY events already in memory, so that the pages
reconnecting to a freshly started process (a deploy) resume from memory, not each from the
database. A reader behind what the memory holds (a resume point older than that, or a slow one)
catches up from the database in batches, filtered by the same keys.

Open readers are bounded: past CORRAL_LIVE_WAITS_PER_PROCESS in this process, or
CORRAL_LIVE_WAITS_PER_USER of one user here, a new wait is refused (``refusal``) with a delay to
retry after, instead of the process slowing down for everyone. When the process is told to stop
(``close_all``, from the web worker) every reader ends at once, so that its pages reconnect to
the processes that go on.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import contextvars
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from project import events
from project.live import event_scopes
from project.models import Event

logger = logging.getLogger(__name__)
POLL_INTERVAL_S = 0.25
# Read the feed at least this often even without NOTIFY (a lost notification costs this much).
LISTEN_TIMEOUT_S = 5.0
KEEP_IN_MEMORY = 5000
READ_BATCH = 1000
KEYS_TTL_S = 30.0
# How long a waiting long poll that got an event waits for the events that come with it.
LINGER_S = 0.1
# A stopping process ends its readers over this long (their pages reconnect elsewhere).
DRAIN_SPREAD_S = 2.0
# What a refused reader is told to wait before trying again (Retry-After, seconds).
RETRY_BUSY_S = 5
RETRY_USER_S = 10


@dataclass(frozen=True)
class Refusal:
    """Why a new wait is not taken now: an HTTP status, a code, a message and Retry-After."""

    status: int
    code: str
    message: str
    retry_after: int


def _preload(limit: int) -> tuple[int, list[Event]]:
    """The latest token and the newest ``limit`` events up to it, oldest first."""
    try:
        newest = list(events.below_horizon(Event.objects.order_by("-id"))[:limit])
        return (newest[0].pk if newest else 0), newest[::-1]
    finally:
        connection.close()


def _read_after(after: int, upto: int | None, limit: int) -> tuple[int | None, list[Event]]:
    """The horizon (None on SQLite) and up to ``limit`` events after ``after``, below it and
    below ``upto``."""
    try:
        horizon = events.horizon()
        found = Event.objects.filter(id__gt=after)
        for bound in (horizon, upto):
            if bound is not None:
                found = found.filter(id__lte=bound)
        return horizon, list(found.order_by("id")[:limit])
    finally:
        connection.close()  # back to the pool: waiting readers hold no connection


def _older_than_the_feed(since: int) -> bool:
    try:
        return events.older_than_the_feed(since)
    finally:
        connection.close()


def _latest_token() -> int:
    try:
        return events.latest_token()
    finally:
        connection.close()


def _keys_of(user) -> event_scopes.ReaderKeys:
    try:
        return event_scopes.reader_keys(user, events.VIEW_ACTIONS)
    finally:
        connection.close()


@dataclass(eq=False)
class Reader:
    """One open stream or long poll: where it is in the feed and what it may see."""

    hub: Hub
    user: object
    position: int  # every event up to here was delivered or is not for this reader
    keys: event_scopes.ReaderKeys = None
    keys_expire: float = 0.0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    registered: bool = False

    def sees(self, event: Event) -> bool:
        return event_scopes.sees(self.keys, event.object_type, event.scope_keys)

    async def _refresh_keys(self) -> None:
        if time.monotonic() >= self.keys_expire:
            self.keys = await self.hub.keys_for(self.user)
            self.keys_expire = time.monotonic() + KEYS_TTL_S

    async def read(self, timeout: float, limit: int = 500, linger: float = 0.0) -> list[Event]:
        """Events after ``position`` this reader may see, waiting up to ``timeout`` seconds.

        ``linger``: having waited, and something arrived, wait this long more for what comes
        with it (the events of one change come within milliseconds of each other), so that a
        long poll is answered once for them rather than once each.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        waited = False
        while True:
            await self._refresh_keys()
            found = await self._collect(limit)
            remaining = deadline - time.monotonic()
            if found and waited and linger > 0 and remaining > 0 and not self.hub.closing:
                await asyncio.sleep(min(linger, remaining))
                found += await self._collect(limit - len(found))
                return found
            if found or remaining <= 0 or self.hub.closing:
                return found
            if self.position < self.hub.last:
                continue  # more to scan (a catch-up batch had nothing visible)
            self.wake.clear()
            waited = True
            wait = min(remaining, max(0.05, self.keys_expire - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), wait)

    async def _collect(self, limit: int) -> list[Event]:
        hub = self.hub
        if self.position >= hub.floor:
            start = bisect.bisect_right(hub.ids, self.position)
            found = []
            for event in hub.kept[start:]:
                if self.sees(event):
                    found.append(event)
                    if len(found) == limit:
                        self.position = event.pk
                        return found
            self.position = max(self.position, hub.last)
            return found
        # Behind memory: a batch from the database, then scan again.
        _, batch = await sync_to_async(_read_after, thread_sensitive=False)(
            self.position, hub.floor, READ_BATCH
        )
        found = [event for event in batch if self.sees(event)][:limit]
        if len(found) == limit:
            self.position = found[-1].pk
        elif len(batch) == READ_BATCH:
            self.position = batch[-1].pk
        else:
            self.position = hub.floor
        return found

    def register(self) -> None:
        """Count this reader among the waiting ones (woken by new events) until ``close``."""
        if not self.registered:
            self.registered = True
            self.hub.readers.add(self)
            self.hub.per_user[self.user.pk] += 1

    def close(self) -> None:
        if self.registered:
            self.registered = False
            self.hub.readers.discard(self)
            self.hub.per_user[self.user.pk] -= 1
            if self.hub.per_user[self.user.pk] <= 0:
                del self.hub.per_user[self.user.pk]


class Hub:
    """This process's follower of the feed and its readers (one per event loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.readers: set[Reader] = set()
        self.per_user: Counter[int] = Counter()
        self.closing = False
        self.kept: list[Event] = []
        self.ids: list[int] = []
        self.last = 0  # every event up to here is read (or was before this process started)
        self.floor = 0  # memory holds every event after this, up to ``last``
        # With ``floor`` 0, memory holds every event the feed kept when the hub started, the
        # oldest being this one: a reader resuming below it missed pruned events.
        self.first_kept: int | None = None
        # A user's keys, or the read of them in flight (their readers share one read).
        self._keys: dict[int, tuple[float, asyncio.Future]] = {}
        self._started: asyncio.Task | None = None

    async def start(self) -> None:
        """Begin following the feed (once; again after a start that failed)."""
        if self._started is None:
            # In a context of its own: not the request's that happens to start it.
            self._started = self.loop.create_task(self._begin(), context=contextvars.Context())
        starting = self._started
        try:
            await asyncio.shield(starting)
        except Exception:
            if self._started is starting:
                self._started = None
            raise

    async def _begin(self) -> None:
        latest, newest = await sync_to_async(_preload, thread_sensitive=False)(KEEP_IN_MEMORY)
        self.last = latest
        if len(newest) < KEEP_IN_MEMORY:
            self.floor, self.first_kept = 0, newest[0].pk if newest else None
        else:
            self.floor = newest[0].pk - 1
        self._keep(newest)
        self._task = self.loop.create_task(
            self._follow(), name="corral-event-hub", context=contextvars.Context()
        )

    async def reader(self, user, position: int) -> Reader:
        """A reader for ``user`` from ``position`` on; ``register`` it before it waits, and
        close it when done."""
        await self.start()
        return Reader(self, user, position)

    async def open(self, user, position: int) -> Reader:
        """A registered reader for ``user`` from ``position`` on (close it when done)."""
        reader = await self.reader(user, position)
        reader.register()
        return reader

    def refusal(self, user) -> Refusal | None:
        """Why one more waiting reader of ``user`` is not taken now, if it is not."""
        if self.closing or len(self.readers) >= settings.CORRAL_LIVE_WAITS_PER_PROCESS:
            return Refusal(
                503,
                "too_many_waiting",
                "This server holds as many open pages and long polls as it can; "
                "try again in a few seconds.",
                RETRY_BUSY_S,
            )
        if self.per_user[user.pk] >= settings.CORRAL_LIVE_WAITS_PER_USER:
            return Refusal(
                429,
                "too_many_waits_of_user",
                f"You have {self.per_user[user.pk]} open pages and long polls on this server, "
                "the most one user may; close some, or try again when one ends.",
                RETRY_USER_S,
            )
        return None

    async def latest(self) -> int:
        """Where a reader starts to get what happens from now on (the feed as this hub has
        read it)."""
        await self.start()
        return self.last

    async def clamp(self, since: int) -> int:
        """``since``, or the latest token if it is beyond the feed (a database restored from a
        backup, a made-up token): such a reader would wait for ids that never come."""
        await self.start()
        if since <= self.last:
            return since
        return min(since, await sync_to_async(_latest_token, thread_sensitive=False)())

    async def resync_needed(self, since: int) -> bool:
        """Whether events after ``since`` may have been pruned (``events.older_than_the_feed``),
        asking the database only for a resume point older than what memory holds."""
        await self.start()
        if since >= self.floor:
            # As ``events.older_than_the_feed`` decides, on what memory holds.
            first = self.first_kept if self.floor == 0 else None
            return first is not None and 0 < since < first - 1
        return await sync_to_async(_older_than_the_feed, thread_sensitive=False)(since)

    def close_all(self) -> None:
        """End every reader, each at a moment drawn within DRAIN_SPREAD_S, and any that opens
        from now on (this process is stopping): their pages reconnect to the processes that go
        on spread over that time, not all in the same instant."""
        self.closing = True
        for reader in self.readers:
            self.loop.call_later(random.uniform(0, DRAIN_SPREAD_S), reader.wake.set)

    async def keys_for(self, user) -> event_scopes.ReaderKeys:
        """``user``'s reader keys, read at most once per KEYS_TTL_S for all its readers."""
        now = time.monotonic()
        cached = self._keys.get(user.pk)
        if (
            cached is None
            or cached[0] <= now
            or (cached[1].done() and cached[1].exception() is not None)
        ):
            if len(self._keys) > 10_000:
                self._keys = {pk: entry for pk, entry in self._keys.items() if entry[0] > now}
            future = self.loop.create_task(
                sync_to_async(_keys_of, thread_sensitive=False)(user), context=contextvars.Context()
            )
            cached = self._keys[user.pk] = (now + KEYS_TTL_S, future)
        return await asyncio.shield(cached[1])

    async def _follow(self) -> None:
        while True:
            try:
                if connection.vendor == "postgresql":
                    await self._listen()
                else:
                    await self.read_new()
                    await asyncio.sleep(POLL_INTERVAL_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("event hub lost the feed; reading it again in a second")
                await asyncio.sleep(1)

    async def _listen(self) -> None:
        import psycopg

        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as conn:
            await conn.execute(f"LISTEN {events.CHANNEL}")
            while True:
                await self.read_new()  # anything missed while (re)connecting, or since the last
                async for _ in conn.notifies(timeout=LISTEN_TIMEOUT_S, stop_after=1):
                    pass

    async def read_new(self) -> None:
        """Read what was committed since the last read and wake the readers it concerns."""
        while True:
            horizon, batch = await sync_to_async(_read_after, thread_sensitive=False)(
                self.last, None, READ_BATCH
            )
            if batch:
                self._keep(batch)
            if len(batch) < READ_BATCH:
                if horizon is not None:
                    # Every id up to the horizon is final: nothing will appear below it.
                    self.last = max(self.last, horizon)
                self._wake(batch)
                return
            self._wake(batch)

    def _keep(self, batch: list[Event]) -> None:
        if not batch:
            return
        self.kept.extend(batch)
        self.ids.extend(event.pk for event in batch)
        self.last = max(self.last, batch[-1].pk)
        if len(self.kept) > KEEP_IN_MEMORY:
            dropped = len(self.kept) - KEEP_IN_MEMORY
            self.floor = self.ids[dropped - 1]
            del self.kept[:dropped]
            del self.ids[:dropped]

    def _wake(self, batch: list[Event]) -> None:
        if not batch:
            return
        for reader in self.readers:
            if reader.wake.is_set():
                continue
            if any(event.pk > reader.position and reader.sees(event) for event in batch):
                reader.wake.set()


_hubs: dict[asyncio.AbstractEventLoop, Hub] = {}


def close_all() -> None:
    """End every open reader of this process's hubs (called on their event loop when the web
    worker begins to stop)."""
    for found in list(_hubs.values()):
        found.close_all()


def hub() -> Hub:
    """The hub of the running event loop."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        for stale in [other for other in _hubs if other.is_closed()]:
            del _hubs[stale]
        found = _hubs[loop] = Hub()
    return found
