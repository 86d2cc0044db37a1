"""While the database cannot be reached (PostgreSQL restarting, a failover, a full connection
pool), every request that needs it is answered ``503`` with ``Retry-After``: JSON under
``/api/`` (``{"detail": …}``, as every API error), a short page elsewhere. Never a 500: nothing
is wrong with the request, and a client that waits a moment and asks again is served.

The connections a process keeps are checked before use (``CONN_HEALTH_CHECKS``, and the
pool's own check under ``make serve``), so the first requests after the database is back are
served on fresh connections rather than failing on ones its restart closed.
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

logger = logging.getLogger(__name__)
RETRY_AFTER_S = 2
MESSAGE = "The database is unavailable for now; try again in a few seconds."
PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">'
    "<title>Unavailable for now</title></head><body><h1>Unavailable for now</h1>"
    f"<p>{MESSAGE}</p></body></html>"
)
# What a lost or unreachable database raises (Django wraps psycopg's errors, a pool's timeout
# among them, in these). A query's own error (an IntegrityError, a bad SQL) is a bug: a 500.
UNREACHABLE = (OperationalError, InterfaceError)


def unavailable(request) -> HttpResponse:
    """The 503 for ``request``: JSON under /api/, a page elsewhere."""
    if request.path_info.startswith("/api/"):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:
        response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


class DatabaseUnavailableMiddleware:
    """Turns the database being unreachable, wherever a view (or its template) meets it, into
    the 503 above."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, UNREACHABLE):
            return None
        logger.warning(
            "%s %s: the database cannot be reached (%s)", request.method, request.path, exception
        )
        return unavailable(request)
