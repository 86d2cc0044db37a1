"""What the live views share: where a reader resumes, and a request that waits without a thread.

Under ASGI an open stream or long poll waits on this process's event hub (project/live/event_hub.py)
as a coroutine. Django runs a request's synchronous parts (middleware, the session and user
lookups) on a thread of the request's own; ``park`` closes the request's database connection
and lets that thread go while the request waits. Under WSGI (the test client, a WSGI server)
the views fall back to the event feed's blocking reads.
"""

from __future__ import annotations

from asgiref.sync import SyncToAsync, sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import JsonResponse

from project import events
from project.live.event_hub import Refusal
from project.web.request_threads import RequestThread


def on_event_loop(request) -> bool:
    """Whether the request is served by an ASGI server (its waits may be coroutines)."""
    return isinstance(request, ASGIRequest)


async def latest_token() -> int:
    return await sync_to_async(events.latest_token)()


async def needs_resync(since: int) -> bool:
    """``events.older_than_the_feed``, from a coroutine."""
    return await sync_to_async(events.older_than_the_feed)(since)


async def release_connection() -> None:
    """Give the request's database connection back to the pool, from its own thread.

    Before a view reads anything on another thread (the event hub's reads): a request holding
    its connection while it waits for one more could, many at once, hold the whole pool.
    """
    await sync_to_async(connections.close_all)()


async def park() -> None:
    """Give back what the request holds while it only waits: its database connection and
    the thread its synchronous parts run on (project/web/request_threads.py; it borrows one again
    if it needs one)."""
    await release_connection()
    context = SyncToAsync.thread_sensitive_context.get(None)
    executor = SyncToAsync.context_to_thread_executor.get(context) if context else None
    if isinstance(executor, RequestThread):
        executor.release()
    elif executor is not None:  # Django's own handler: a thread per request
        del SyncToAsync.context_to_thread_executor[context]
        executor.shutdown(wait=False)


def refused(refusal: Refusal) -> JsonResponse:
    """The answer to a stream or long poll the event hub does not take now."""
    body = {"detail": refusal.message, "code": refusal.code}
    response = JsonResponse(body, status=refusal.status)
    response["Retry-After"] = str(refusal.retry_after)
    return response
