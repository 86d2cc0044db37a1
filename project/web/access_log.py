"""One line per HTTP request on the ``corral.access`` logger, whatever serves Corral (`make run`,
`make serve`, a WSGI server): client address, user, method, path, status and milliseconds.

The line is written when the response starts, its time measured to then: an event stream or a
long poll gets its line when it opens, with the time it took to open, not hours later when it
ends (its line says ``streaming``). The live requests the ASGI layer answers without Django
(``project/live/asgi.py``) are logged there, through ``log_direct_answer``. Websockets get no
line here.

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
from django.conf import settings
from django.utils.functional import SimpleLazyObject, empty

from project.web.client_address import client_address

logger = logging.getLogger("corral.access")
STATIC_PREFIX = "/" + settings.STATIC_URL.lstrip("/")

# Query parameters whose value is a secret, by name (case-insensitive, anywhere in the name).
SECRET_PARAMETER = re.compile(r"token|ticket|password|passwd|secret|key|signature|session", re.I)
REDACTED = "***"


def logged_path(path: str, query: str) -> str:
    """A request's path and query string, secret values replaced by ``***``."""
    path = quote(path, safe="/:@!$&'()*+,;=-._~%")
    if not query:
        return path
    pairs = parse_qsl(query, keep_blank_values=True)
    shown = [(name, REDACTED if SECRET_PARAMETER.search(name) else value) for name, value in pairs]
    return f"{path}?{urlencode(shown, safe='*/:,')}"


def write_line(
    request, user, method: str, path: str, status: int, started: float, streaming: bool
) -> None:
    """The access line of one request (``request``: what has its address in ``META``): at
    INFO, but a static file served or not modified at DEBUG (a page of the admin console asks
    for twenty)."""
    milliseconds = (time.perf_counter() - started) * 1000
    username = _username(user)
    level = logging.INFO
    if status in (200, 304) and request.path.startswith(STATIC_PREFIX):
        level = logging.DEBUG
    logger.log(
        level,
        "%s %s %s %s %d %.0fms%s",
        client_address(request) or "-",
        username,
        method,
        path,
        status,
        milliseconds,
        " streaming" if streaming else "",
        extra={
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": round(milliseconds, 1),
            "user": username,
        },
    )


def _username(user) -> str:
    """The user's name; ``-`` when anonymous, or when the request never looked its user up (a
    static file, a page for everyone): looking it up here would cost a query, and in an
    asynchronous middleware stack this runs on the event loop, where the database may not be
    used."""
    if user is None or (isinstance(user, SimpleLazyObject) and user._wrapped is empty):
        return "-"
    return user.get_username() if user.is_authenticated else "-"


def log_request(request, response, started: float) -> None:
    """The access line of a request Django answered."""
    path = logged_path(request.path, request.META.get("QUERY_STRING", ""))
    user = getattr(request, "user", None)
    write_line(
        request, user, request.method, path, response.status_code, started, response.streaming
    )


def log_direct_answer(request, user, status: int, started: float, streaming: bool) -> None:
    """The access line of a live request the ASGI layer answered without Django
    (``project/live/asgi.py``; ``request``: the ASGIRequest it read), as Django's would be."""
    path = logged_path(request.path, request.META.get("QUERY_STRING", ""))
    write_line(request, user, request.method, path, status, started, streaming)


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
