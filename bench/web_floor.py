"""The floor of the web benchmarks: an asyncio server answering from memory, served as `make
serve` serves Corral (gunicorn, uvicorn workers), with the same three routes and nothing else.

- ``GET /api/me/``: a fixed JSON body;
- ``GET /api/events/?since=&timeout=``: waits ``timeout`` seconds, then answers no events;
- ``GET /events/stream/``: a server-sent-events response with a comment every 5 s, for 25 s.

What Corral's web tier manages beside it is what Django, the database and the permission checks
cost; this server has none of them.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs

ME = json.dumps({"id": 1, "username": "floor", "is_superuser": False}).encode()
STREAM_SECONDS = 25.0
KEEPALIVE_S = 5.0


async def _read_body(receive) -> None:
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def _send(send, status: int, content_type: bytes, body: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await _read_body(receive)
    path = scope["path"]
    if path == "/api/me/":
        await _send(send, 200, b"application/json", ME)
    elif path == "/api/events/":
        query = parse_qs(scope["query_string"].decode())
        since = int(query.get("since", ["0"])[0] or 0)
        await asyncio.sleep(min(60.0, float(query.get("timeout", ["0"])[0] or 0)))
        body = json.dumps({"token": since, "events": []}).encode()
        await _send(send, 200, b"application/json", body)
    elif path == "/events/stream/":
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"retry: 1000\n\n", "more_body": True})
        for _ in range(int(STREAM_SECONDS / KEEPALIVE_S)):
            await asyncio.sleep(KEEPALIVE_S)
            await send(
                {"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True}
            )
        await send({"type": "http.response.body", "body": b""})
    else:
        await _send(send, 404, b"application/json", b'{"detail": "Not found."}')
