"""The query parameters an API operation takes: those its OpenAPI schema documents, and
``format`` (DRF's renderer choice). Any other is a 400 naming it, so a misspelt filter or a
``?page=`` a list does not know never passes for an answer to a question nobody asked.

The allowlist is read from the schema drf-spectacular builds from the views (their filter
sets, ordering and search fields, pagination, and ``extend_schema`` parameters), once per
process, so what the API accepts and what it documents cannot drift apart. Operations the
schema leaves out (the schema and docs pages themselves, OPTIONS) are not checked.
``project/api/middleware.py`` applies it to every request under /api/.
"""

from __future__ import annotations

import functools
import threading

from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from rest_framework.settings import api_settings

# Taken by every operation: DRF reads it to choose the renderer (?format=json, ?format=api).
ALWAYS_ACCEPTED = frozenset({api_settings.URL_FORMAT_OVERRIDE})


_building = threading.Lock()


def documented_parameters() -> dict[tuple[object, str], frozenset[str]]:
    """(URL pattern callback, HTTP method) -> the query parameter names its schema lists.
    Built on the first request that carries parameters (about a second), once per process."""
    with _building:
        return _documented_parameters()


@functools.cache
def _documented_parameters() -> dict[tuple[object, str], frozenset[str]]:
    generator = SchemaGenerator()
    # Warnings about the schema are for `manage.py spectacular`, not for every process start.
    with GENERATOR_STATS.silence():
        paths = generator.get_schema(request=None, public=True)["paths"]
    accepted = {}
    for path, _regex, method, callback in generator.endpoints:
        view = generator.create_view(callback, method)
        operation = paths.get(generator.coerce_path(path, method, view), {}).get(method.lower())
        if operation is not None:
            accepted[(callback, method)] = frozenset(
                parameter["name"]
                for parameter in operation.get("parameters", [])
                if parameter["in"] == "query"
            )
    return accepted


def refused_parameters(view_func, method: str, given) -> dict[str, list[str]] | None:
    """A field message for each name in ``given`` the operation does not take, or None."""
    method = "GET" if method == "HEAD" else method
    accepted = documented_parameters().get((view_func, method))
    if accepted is None:
        return None
    unknown = sorted(set(given) - accepted - ALWAYS_ACCEPTED)
    if not unknown:
        return None
    takes = ", ".join(sorted(accepted | ALWAYS_ACCEPTED))
    message = f"Not a parameter of this operation; it takes: {takes}."
    return {name: [message] for name in unknown}
