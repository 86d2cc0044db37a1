"""One line per HTTP request on the ``corral.access`` logger, whatever serves Corral (`make run`,
`make serve`, a WSGI server): client address, user, method, path, status and milliseconds.

The line is written when the response starts, its time measured to then: an event stream or a
long poll gets its line when it opens, with the time it took to open, not hours later when it
ends (its line says ``streaming``). Websockets do not pass through Django's middleware and get
no line here.

Secrets never reach the log: the values of query parameters that carry them (a console page's
one-time ``?token=``, a password, a key) are written as ``***``. Passwords and tokens in bodies
and headers are never logged at all.
"""

from __future__ import annotations

import logging
import re
import time
from urllib.parse import parse_qsl, quote, urlencode

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from project.web.client_address import client_address

logger = logging.getLogger("corral.access")

# Query parameters whose value is a secret, by name (case-insensitive, anywhere in the name).
SECRET_PARAMETER = re.compile(r"token|ticket|password|passwd|secret|key|signature|session", re.I)
REDACTED = "***"


def logged_path(request) -> str:
    """The request's path and query string, secret values replaced by ``***``."""
    path = quote(request.path, safe="/:@!$&'()*+,;=-._~%")
    query = request.META.get("QUERY_STRING", "")
    if not query:
        return path
    pairs = parse_qsl(query, keep_blank_values=True)
    shown = [(name, REDACTED if SECRET_PARAMETER.search(name) else value) for name, value in pairs]
    return f"{path}?{urlencode(shown, safe='*/:,')}"


def log_request(request, response, started: float) -> None:
    milliseconds = (time.perf_counter() - started) * 1000
    user = getattr(request, "user", None)
    username = user.get_username() if user is not None and user.is_authenticated else "-"
    streaming = " streaming" if response.streaming else ""
    path = logged_path(request)
    logger.info(
        "%s %s %s %s %d %.0fms%s",
        client_address(request) or "-",
        username,
        request.method,
        path,
        response.status_code,
        milliseconds,
        streaming,
        extra={
            "method": request.method,
            "path": path,
            "status": response.status_code,
            "duration_ms": round(milliseconds, 1),
            "user": username,
        },
    )


class AccessLogMiddleware:
    """First in MIDDLEWARE, so that its time covers every other middleware and its line every
    response, static files and refusals included."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        started = time.perf_counter()
        response = self.get_response(request)
        log_request(request, response, started)
        return response

    async def _acall(self, request):
        started = time.perf_counter()
        response = await self.get_response(request)
        log_request(request, response, started)
        return response
