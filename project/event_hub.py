"""Live readers of the event feed in an ASGI process: one listener, many waiting coroutines.

One task per process follows the feed (PostgreSQL: LISTEN on its own async connection, and a
read every few seconds in any case; SQLite: a read every POLL_INTERVAL_S) and reads each new
batch of events once, below the horizon (project/events.py). It keeps the latest events in
memory and wakes only the readers entitled to one of them, by matching scope keys
(project/event_scopes.py): no permission query per wake. A reader's keys come from its grants
when it opens and again every KEYS_TTL_S.

A reader behind what the memory holds (a resume point from before this process started, or a
slow one) catches up from the database in batches, filtered by the same keys.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.db import connection

from project import event_scopes, events
from project.models import Event

logger = logging.getLogger(__name__)
POLL_INTERVAL_S = 0.25
# Read the feed at least this often even without NOTIFY (a lost notification costs this much).
LISTEN_TIMEOUT_S = 5.0
KEEP_IN_MEMORY = 5000
READ_BATCH = 1000
KEYS_TTL_S = 30.0


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

    def sees(self, event: Event) -> bool:
        return event_scopes.sees(self.keys, event.object_type, event.scope_keys)

    async def _refresh_keys(self) -> None:
        if time.monotonic() >= self.keys_expire:
            self.keys = await self.hub.keys_for(self.user)
            self.keys_expire = time.monotonic() + KEYS_TTL_S

    async def read(self, timeout: float, limit: int = 500) -> list[Event]:
        """Events after ``position`` this reader may see, waiting up to ``timeout`` seconds."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            await self._refresh_keys()
            found = await self._collect(limit)
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            if self.position < self.hub.last:
                continue  # more to scan (a catch-up batch had nothing visible)
            self.wake.clear()
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

    def close(self) -> None:
        self.hub.readers.discard(self)


class Hub:
    """This process's follower of the feed and its readers (one per event loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.readers: set[Reader] = set()
        self.kept: list[Event] = []
        self.ids: list[int] = []
        self.last = 0  # every event up to here is read (or was before this process started)
        self.floor = 0  # memory holds every event after this, up to ``last``
        self._keys: dict[int, tuple[float, event_scopes.ReaderKeys]] = {}
        self._started: asyncio.Task | None = None

    async def start(self) -> None:
        """Begin following the feed (once; again after a start that failed)."""
        if self._started is None:
            self._started = self.loop.create_task(self._begin())
        starting = self._started
        try:
            await asyncio.shield(starting)
        except Exception:
            if self._started is starting:
                self._started = None
            raise

    async def _begin(self) -> None:
        self.last = self.floor = await sync_to_async(events.latest_token, thread_sensitive=False)()
        self._task = self.loop.create_task(self._follow(), name="corral-event-hub")

    async def open(self, user, position: int) -> Reader:
        """A reader for ``user`` from ``position`` on (close it when done)."""
        await self.start()
        reader = Reader(self, user, position)
        self.readers.add(reader)
        return reader

    async def keys_for(self, user) -> event_scopes.ReaderKeys:
        """``user``'s reader keys, read at most once per KEYS_TTL_S for all its readers."""
        now = time.monotonic()
        cached = self._keys.get(user.pk)
        if cached is not None and cached[0] > now:
            return cached[1]
        keys = await sync_to_async(_keys_of, thread_sensitive=False)(user)
        if len(self._keys) > 10_000:
            self._keys = {pk: entry for pk, entry in self._keys.items() if entry[0] > now}
        self._keys[user.pk] = (now + KEYS_TTL_S, keys)
        return keys

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


def hub() -> Hub:
    """The hub of the running event loop."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        for stale in [other for other in _hubs if other.is_closed()]:
            del _hubs[stale]
        found = _hubs[loop] = Hub()
    return found
