"""``GET /api/``: where to start, the absolute URL of every top-level collection of the API (as
DRF's DefaultRouter root lists its routes), and of the caller's own page, the event feed, the
schema and its documentation. Like every other API view, only for an authenticated caller (a
token or a session); anyone else gets the 401 saying how to authenticate.

The collections are read from the URL configuration, so a route an app adds to its api/urls.py
is listed without being named here.
"""

from __future__ import annotations

import functools

from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

# Routes that are not collections but worth finding from the root.
OTHER_ROUTES = {"me": "me", "events": "events", "schema": "schema", "docs": "api-docs"}

ROOT_SCHEMA = {
    "type": "object",
    "description": "Each collection's name (its path under /api/) and its absolute URL.",
    "additionalProperties": {"type": "string", "format": "uri"},
}


def _patterns(patterns):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            yield pattern


@functools.cache
def root_paths() -> dict[str, str]:
    """Name -> path of every collection under /api/ (a router's list route, one that needs no
    id) and of the routes in ``OTHER_ROUTES``, sorted by name."""
    api = next(p for p in get_resolver().url_patterns if str(p.pattern) == "api/")
    paths = {}
    for pattern in _patterns(api.url_patterns):
        if not (pattern.name or "").endswith("-list"):
            continue
        try:
            path = reverse(pattern.name)
        except NoReverseMatch:  # a nested collection (one policy's filters): not top-level
            continue
        paths.setdefault(path.removeprefix("/api/").rstrip("/"), path)
    paths.update({name: reverse(route) for name, route in OTHER_ROUTES.items()})
    return dict(sorted(paths.items()))


class ApiRootView(APIView):
    """The API's collections and where to find its schema and documentation."""

    @extend_schema(operation_id="api_root", responses={200: ROOT_SCHEMA})
    def get(self, request):
        return Response(
            {name: request.build_absolute_uri(path) for name, path in root_paths().items()}
        )
