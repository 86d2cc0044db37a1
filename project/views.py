"""Portal pages shared by every app: logging in and out, and the live event stream."""

from __future__ import annotations

import json
import time

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import close_old_connections
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from project import event_hub, events, live

KEEPALIVE_S = 5.0
RESYNC = "event: resync\ndata: {}\n\n"


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
    return f"id: {event.pk}\nevent: change\ndata: {_event_payload(event)}\n\n"


@require_GET
@login_required
async def event_stream(request):
    """Server-sent events: everything the user may see that happens from now on.

    Built on the event feed. One response lasts CORRAL_EVENT_STREAM_SECONDS; the browser
    reconnects with Last-Event-ID and misses nothing. A resume point older than the feed keeps
    (events pruned since) gets ``event: resync`` first (what the page shows must be reloaded),
    then what is left.
    A comment line every few seconds keeps proxies from closing it and notices a closed tab.
    """
    resume = request.headers.get("Last-Event-ID") or request.GET.get("since")
    latest = await live.latest_token()
    try:
        since = int(resume) if resume else latest
    except ValueError:
        since = None
    if since is None or since < 0:
        return HttpResponseBadRequest("Last-Event-ID must be an event id.")
    # A resume point beyond the feed (a database restored from a backup, a made-up header)
    # would wait for ids that never come: the stream resumes from the latest event instead.
    since = min(since, latest)
    resync = await live.needs_resync(since)
    user = await request.auser()
    seconds = settings.CORRAL_EVENT_STREAM_SECONDS
    if live.on_event_loop(request):
        body = _live_stream(user, since, seconds, resync)
    else:
        body = _polled_stream(user, since, seconds, resync)
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _opening(since: int, resync: bool) -> str:
    # The resume point first: a browser whose stream ends before any event reconnects from
    # here (Last-Event-ID), not from whatever is latest by then.
    return (RESYNC if resync else "") + f"retry: 1000\nid: {since}\n\n"


async def _live_stream(user, since: int, seconds: float, resync: bool):
    """The stream as a coroutine on this process's event hub (ASGI)."""
    yield _opening(since, resync)
    await live.park()
    reader = await event_hub.hub().open(user, since)
    sent = since
    ends = time.monotonic() + seconds
    try:
        while (remaining := ends - time.monotonic()) > 0:
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
