"""The API's event feed (GET /api/events/): what changed since a token, as a long poll.

Under ASGI a poll that has to wait does so as a coroutine on this process's event hub
(project/event_hub.py): the view answers at once when something is there, and otherwise
``event_feed`` parks the request until an event the user may see arrives or the timeout ends.
Under WSGI the view waits on the feed's blocking read.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from hosts.api.serializers import EventFeedSerializer, EventSerializer
from project import event_hub, events, live


class EventFeedView(APIView):
    """What changed since a token, waiting up to ``timeout`` seconds when nothing has."""

    @extend_schema(
        parameters=[
            OpenApiParameter("since", int, description="Token from the last answer (0: start)."),
            OpenApiParameter("timeout", float, description="Seconds to wait, at most 60."),
        ],
        responses=EventFeedSerializer,
    )
    def get(self, request):
        try:
            # An empty value means "not given", as for every other query parameter.
            since = int(request.query_params.get("since") or 0)
            timeout = float(request.query_params.get("timeout") or 0)
        except ValueError:
            raise ValidationError({"since": "since and timeout must be numbers."}) from None
        if since < 0 or not 0 <= timeout <= 60:
            raise ValidationError({"timeout": "since must be >= 0 and timeout 0 to 60 seconds."})
        # Events after the token were pruned: the reader gets what is left, and is told.
        resync = events.older_than_the_feed(since)
        waits_outside = getattr(request._request, "corral_waits_outside", False)
        found = events.read_since(request.user, since, 0 if waits_outside else timeout)
        token = found[-1].pk if found else max(since, 0)
        answer = {"token": token, "events": EventSerializer(found, many=True).data}
        response = Response({**answer, "resync": True} if resync else answer)
        if waits_outside and not found and timeout > 0 and not resync:
            response.corral_wait = (request.user, since, timeout)
        return response


_view = EventFeedView.as_view()


async def event_feed(request, *args, **kwargs):
    """``EventFeedView``, whose wait (if any) is a coroutine under ASGI."""
    if not live.on_event_loop(request):
        return await sync_to_async(_view)(request, *args, **kwargs)
    request.corral_waits_outside = True
    response = await sync_to_async(_view)(request, *args, **kwargs)
    wait = getattr(response, "corral_wait", None)
    if wait is None:
        return response
    user, since, timeout = wait
    await live.park()
    reader = await event_hub.hub().open(user, since)
    try:
        found = await reader.read(timeout)
    finally:
        reader.close()
    if found:
        response.data = {"token": found[-1].pk, "events": EventSerializer(found, many=True).data}
    return response


# What DRF, the schema and the query-parameter check read from the view: it is EventFeedView.
for _attribute in ("cls", "initkwargs", "csrf_exempt"):
    setattr(event_feed, _attribute, getattr(_view, _attribute))
