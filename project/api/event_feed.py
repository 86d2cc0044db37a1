"""The API's event feed (GET /api/events/): what changed since a token, as a long poll.

Under ASGI the answer comes from this process's event hub (project/live/event_hub.py), which holds
the newest events in memory: DRF's view only authenticates and checks the parameters, and
``event_feed`` reads the hub. When there is nothing yet and the caller may wait, the answer is a
response whose body is written when an event arrives or the timeout ends: the middleware stack
has finished and the request's thread and database connection are given back, so a waiting poll
costs a coroutine and a socket, as an open event stream does. Past the hub's limits a poll that
would wait is refused (503, or 429 for one user's many) with Retry-After.

A script's re-poll (an API token, ``since`` and ``timeout``) is answered the same way from the
hub by ``_direct``, at the ASGI layer, without Django's middleware and request thread
(project/live/asgi.py): a burst of re-polls after an event costs little more than the answers.

Under WSGI (the test client, a WSGI server) the view reads the database and waits on the feed's
blocking read.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from project import events
from project.api.event_serializers import EventFeedSerializer, EventSerializer
from project.live import event_hub, waits
from project.live.asgi import TOKEN, DirectRequest, live_view


def _parameters(query) -> tuple[int, float]:
    """``since`` and ``timeout`` from the query (ValidationError naming the field)."""
    try:
        # An empty value means "not given", as for every other query parameter.
        since = int(query.get("since") or 0)
        timeout = float(query.get("timeout") or 0)
    except ValueError:
        raise ValidationError({"since": "since and timeout must be numbers."}) from None
    if since < 0 or not 0 <= timeout <= 60:
        raise ValidationError({"timeout": "since must be >= 0 and timeout 0 to 60 seconds."})
    return since, timeout


class EventFeedView(APIView):
    """What changed since a token, waiting up to ``timeout`` seconds when nothing has."""

    @extend_schema(
        parameters=[
            OpenApiParameter("since", int, description="Token from the last answer (0: start)."),
            OpenApiParameter("timeout", float, description="Seconds to wait, at most 60."),
        ],
        responses={
            200: EventFeedSerializer,
            429: OpenApiResponse(
                description="You hold as many waiting polls and open pages on this server as "
                "one user may: retry after the Retry-After header's seconds."
            ),
            503: OpenApiResponse(
                description="This server holds as many waiting polls and open pages as it can: "
                "retry after the Retry-After header's seconds (with some jitter)."
            ),
        },
    )
    def get(self, request):
        since, timeout = _parameters(request.query_params)
        if getattr(request._request, "corral_answers_from_hub", False):
            # ``event_feed`` fills the answer from the event hub, whose reads take connections
            # of their own: this request's goes back to the pool now (waits.release_connection).
            response = Response({"token": since, "events": []})
            response.corral_wait = (request.user, since, timeout)
            connection.close()
            return response
        # Events after the token were pruned: the reader gets what is left, and is told.
        resync = events.older_than_the_feed(since)
        found = events.read_since(request.user, since, timeout)
        token = found[-1].pk if found else max(since, 0)
        answer = {"token": token, "events": EventSerializer(found, many=True).data}
        return Response({**answer, "resync": True} if resync else answer)


_view = EventFeedView.as_view()


def _answer(token: int, found: list, resync: bool) -> dict:
    answer = {"token": token, "events": [_serialized(event) for event in found]}
    return {**answer, "resync": True} if resync else answer


def _serialized(event) -> dict:
    """``event`` as the feed shows it, worked out once per event in this process: the hub's
    events are shared by every reader they reach."""
    data = getattr(event, "corral_api_data", None)
    if data is None:
        data = event.corral_api_data = EventSerializer(event).data
    return data


async def _from_hub(user, since: int, timeout: float) -> tuple[dict | None, event_hub.Reader]:
    """The answer at once, if there is one (something new, a resync, or no wait asked); else
    None and the reader to wait on."""
    hub = event_hub.hub()
    resync = await hub.resync_needed(since)
    reader = await hub.reader(user, since)
    found = await reader.read(0)
    if found or timeout == 0 or resync:
        return _answer(found[-1].pk if found else reader.position, found, resync), reader
    return None, reader


async def _rendered(response: Response, answer: dict) -> bytes:
    response.data = answer
    if isinstance(response.accepted_renderer, JSONRenderer):
        return response.rendered_content
    # The browsable API renders templates: on a thread, as any synchronous work.
    return await sync_to_async(lambda: response.rendered_content, thread_sensitive=False)()


async def _wait_for_answer(reader: event_hub.Reader, timeout: float) -> dict:
    reader.register()
    try:
        found = await reader.read(timeout, linger=event_hub.LINGER_S)
    finally:
        reader.close()
    return _answer(found[-1].pk if found else reader.position, found, False)


async def _direct(request: DirectRequest) -> bool:
    """A script's poll answered at the ASGI layer, as ``event_feed`` would (project/live/asgi.py);
    False leaves it to Django (bad parameters, a refusal)."""
    try:
        since, timeout = _parameters(request.query)
    except ValidationError:
        return False
    answer, reader = await _from_hub(request.user, since, timeout)
    if answer is not None:
        await request.answer(JSONRenderer().render(answer))
        return True
    if event_hub.hub().refusal(request.user) is not None:
        return False

    async def rendered() -> bytes:
        return JSONRenderer().render(await _wait_for_answer(reader, timeout))

    await request.until_answered(rendered())
    return True


@live_view(direct=_direct, credential=TOKEN, params=("since", "timeout"))
async def event_feed(request, *args, **kwargs):
    """``EventFeedView``, answered from the event hub and waiting as a coroutine under ASGI."""
    if not waits.on_event_loop(request):
        return await sync_to_async(_view)(request, *args, **kwargs)
    request.corral_answers_from_hub = True
    response = await sync_to_async(_view)(request, *args, **kwargs)
    wait = getattr(response, "corral_wait", None)
    if wait is None:
        return response  # refused: bad parameters, not signed in
    user, since, timeout = wait
    answer, reader = await _from_hub(user, since, timeout)
    if answer is not None:
        response.data = answer
        return response
    refusal = event_hub.hub().refusal(user)
    if refusal is not None:
        return waits.refused(refusal)
    renderer = response.accepted_renderer
    charset = f"; charset={renderer.charset}" if renderer.charset else ""
    content_type = renderer.media_type + charset
    waiting = StreamingHttpResponse(_wait(response, reader, timeout), content_type=content_type)
    for header, value in response.items():
        waiting.headers.setdefault(header, value)
    return waiting


async def _wait(response: Response, reader: event_hub.Reader, timeout: float):
    """The body of a poll that waits: the answer once an event arrives or the timeout ends."""
    await waits.park()
    yield await _rendered(response, await _wait_for_answer(reader, timeout))


# What DRF, the schema and the query-parameter check read from the view: it is EventFeedView.
for _attribute in ("cls", "initkwargs", "csrf_exempt"):
    setattr(event_feed, _attribute, getattr(_view, _attribute))
