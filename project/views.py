"""Portal pages shared by every app: logging in and out, and the live event stream."""

from __future__ import annotations

import json
import random
import time

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import close_old_connections
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from project import events
from project.live import event_hub, waits
from project.live.asgi import SESSION, DirectRequest, live_view

KEEPALIVE_S = 5.0
RESYNC = "event: resync\ndata: {}\n\n"
# A stream ended because its process stops asks its browser to come back after a delay drawn
# in this range (ms), so that the pages of a stopping process reconnect spread over seconds.
DRAIN_RETRY_MS = (1000, 4000)


def _event_payload(event) -> str:
    return json.dumps(
        {
            "id": event.pk,
            "kind": event.kind,
            "type": event.object_type,
            "object": event.object_id,
            "message": event.message,
        }
    )


def _change(event) -> str:
    """``event`` as a block of the stream, worked out once per event in this process (the
    hub's events are shared by every stream they reach)."""
    block = getattr(event, "corral_stream_block", None)
    if block is None:
        block = f"id: {event.pk}\nevent: change\ndata: {_event_payload(event)}\n\n"
        event.corral_stream_block = block
    return block


async def _direct_stream(request: DirectRequest) -> bool:
    """A browser's stream answered at the ASGI layer, as ``event_stream`` would
    (project/live/asgi.py); False leaves it to Django (a bad resume point, a refusal)."""
    resume = request.header("Last-Event-ID") or request.query.get("since")
    try:
        since = int(resume) if resume else None
    except ValueError:
        return False
    if since is not None and since < 0:
        return False
    hub = event_hub.hub()
    since = await hub.latest() if since is None else await hub.clamp(since)
    resync = await hub.resync_needed(since)
    if hub.refusal(request.user) is not None:
        return False
    seconds = settings.CORRAL_EVENT_STREAM_SECONDS
    await request.stream(_live_stream(hub, request.user, since, seconds, resync, parks=False))
    return True


@live_view(direct=_direct_stream, credential=SESSION, params=("since",))
@require_GET
@login_required
async def event_stream(request):
    """Server-sent events: everything the user may see that happens from now on.

    Built on the event feed. One response lasts CORRAL_EVENT_STREAM_SECONDS; the browser
    reconnects with Last-Event-ID and misses nothing. A resume point older than the feed keeps
    (events pruned since) gets ``event: resync`` first (what the page shows must be reloaded),
    then what is left.
    A comment line every few seconds keeps proxies from closing it and notices a closed tab.
    Past the event hub's limits the stream is refused (503, or 429 for one user's many) with
    Retry-After; the page's script tries again later.
    """
    resume = request.headers.get("Last-Event-ID") or request.GET.get("since")
    try:
        since = int(resume) if resume else None
    except ValueError:
        return HttpResponseBadRequest("Last-Event-ID must be an event id.")
    if since is not None and since < 0:
        return HttpResponseBadRequest("Last-Event-ID must be an event id.")
    user = await request.auser()
    seconds = settings.CORRAL_EVENT_STREAM_SECONDS
    if not waits.on_event_loop(request):
        latest = await waits.latest_token()
        since = latest if since is None else min(since, latest)
        resync = await waits.needs_resync(since)
        body = _polled_stream(user, since, seconds, resync)
    else:
        await waits.release_connection()
        hub = event_hub.hub()
        # A resume point beyond the feed (a database restored from a backup, a made-up header)
        # would wait for ids that never come: the stream resumes from the latest event instead.
        since = await hub.latest() if since is None else await hub.clamp(since)
        resync = await hub.resync_needed(since)
        refusal = hub.refusal(user)
        if refusal is not None:
            return waits.refused(refusal)
        body = _live_stream(hub, user, since, seconds, resync)
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _opening(since: int, resync: bool) -> str:
    # The resume point first: a browser whose stream ends before any event reconnects from
    # here (Last-Event-ID), not from whatever is latest by then.
    return (RESYNC if resync else "") + f"retry: 1000\nid: {since}\n\n"


async def _live_stream(hub, user, since: int, seconds: float, resync: bool, parks: bool = True):
    """The stream as a coroutine on this process's event hub (ASGI); it ends early when the
    process is stopping, so that the browser reconnects to one that goes on. ``parks``: the
    request has a thread and a connection of Django's to give back first."""
    reader = await hub.open(user, since)
    sent = since
    ends = time.monotonic() + seconds
    try:
        yield _opening(since, resync)
        if parks:
            await waits.park()
        while (remaining := ends - time.monotonic()) > 0 and not hub.closing:
            found = await reader.read(min(KEEPALIVE_S, remaining))
            for event in found:
                sent = event.pk
                yield _change(event)
            if not found:
                if reader.position > sent:
                    # Past events this user may not see: resume from here next time, so a
                    # quiet stream's resume point stays inside the feed.
                    sent = reader.position
                    yield f"id: {sent}\n\n"
                else:
                    yield ": keepalive\n\n"
        if hub.closing:
            yield f"retry: {random.randint(*DRAIN_RETRY_MS)}\n\n"
    finally:
        reader.close()


def _polled_stream(user, since: int, seconds: float, resync: bool):
    """The stream on blocking reads of the feed (WSGI)."""
    yield _opening(since, resync)
    ends = time.monotonic() + seconds
    try:
        while (remaining := ends - time.monotonic()) > 0:
            found = events.read_since(user, since, min(KEEPALIVE_S, remaining))
            for event in found:
                since = event.pk
                yield _change(event)
            if not found:
                yield ": keepalive\n\n"
    finally:
        close_old_connections()
