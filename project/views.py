"""Portal pages shared by every app: logging in and out, and the live event stream."""

from __future__ import annotations

import json
import time

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import close_old_connections
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from project import events

KEEPALIVE_S = 5.0


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


@require_GET
@login_required
def event_stream(request):
    """Server-sent events: everything the user may see that happens from now on.

    Built on the event feed (project.events.read_since). One response lasts
    CORRAL_EVENT_STREAM_SECONDS; the browser reconnects with Last-Event-ID and misses nothing.
    A comment line every few seconds keeps proxies from closing it and notices a closed tab.
    """
    resume = request.headers.get("Last-Event-ID") or request.GET.get("since")
    latest = events.latest_token()
    try:
        since = int(resume) if resume else latest
    except ValueError:
        since = None
    if since is None or since < 0:
        return HttpResponseBadRequest("Last-Event-ID must be an event id.")
    # A resume point beyond the feed (a database restored from a backup, a made-up header)
    # would wait for ids that never come: the stream resumes from the latest event instead.
    since = min(since, latest)
    user = request.user
    seconds = settings.CORRAL_EVENT_STREAM_SECONDS

    def stream():
        nonlocal since
        # The resume point first: a browser whose stream ends before any event reconnects from
        # here (Last-Event-ID), not from whatever is latest by then.
        yield f"retry: 1000\nid: {since}\n\n"
        ends = time.monotonic() + seconds
        try:
            while (remaining := ends - time.monotonic()) > 0:
                found = events.read_since(user, since, min(KEEPALIVE_S, remaining))
                for event in found:
                    since = event.pk
                    yield f"id: {event.pk}\nevent: change\ndata: {_event_payload(event)}\n\n"
                if not found:
                    yield ": keepalive\n\n"
        finally:
            close_old_connections()

    response = StreamingHttpResponse(stream(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
