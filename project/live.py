"""What the live views share: where a reader resumes, and a request that waits without a thread.

Under ASGI an open stream or long poll waits on this process's event hub (project/event_hub.py)
as a coroutine. Django runs a request's synchronous parts (middleware, the session and user
lookups) on a thread of the request's own; ``park`` closes the request's database connection
and lets that thread go while the request waits. Under WSGI (the test client, a WSGI server)
the views fall back to the event feed's blocking reads.
"""

from __future__ import annotations

from asgiref.sync import SyncToAsync, sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connections

from project import events


def on_event_loop(request) -> bool:
    """Whether the request is served by an ASGI server (its waits may be coroutines)."""
    return isinstance(request, ASGIRequest)


async def latest_token() -> int:
    return await sync_to_async(events.latest_token)()


async def needs_resync(since: int) -> bool:
    """``events.older_than_the_feed``, from a coroutine."""
    return await sync_to_async(events.older_than_the_feed)(since)


async def park() -> None:
    """Give back what the request holds while it only waits: its database connection and
    the thread Django keeps for its synchronous parts (a new one is made if it needs one)."""
    await sync_to_async(connections.close_all)()
    context = SyncToAsync.thread_sensitive_context.get(None)
    executor = SyncToAsync.context_to_thread_executor.pop(context, None) if context else None
    if executor is not None:
        executor.shutdown(wait=False)
