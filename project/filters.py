"""The API's list filters.

The base filter set: filters that name related objects accept only objects the caller may see,
so filtering by an invisible id answers like filtering by one that does not exist. Ordering and
search take only what a list declares, and the schema says what that is.
"""

import django_filters
import django_filters.rest_framework
from rest_framework import filters
from rest_framework.exceptions import ValidationError

from project.access.permissions import viewable


class ScopedFilterSet(django_filters.FilterSet):
    def __init__(self, data=None, queryset=None, *, request=None, **kwargs):
        super().__init__(data, queryset, request=request, **kwargs)
        user = getattr(request, "user", None)
        for filter_ in self.filters.values():
            related = getattr(filter_, "queryset", None)
            if user is None or related is None or callable(related):
                continue
            if hasattr(related.model, "grant_scopes"):
                filter_.queryset = viewable(related, user)


class ScopedFilterBackend(django_filters.rest_framework.DjangoFilterBackend):
    """Lists that only name ``filterset_fields`` get a ScopedFilterSet too."""

    filterset_base = ScopedFilterSet


ORDERING_DESCRIPTION = "Comma-separated fields to order by; '-' before one descends."


def ordering_terms(value: str | None, valid: list[str], parameter: str = "ordering") -> list[str]:
    """``?ordering=name,-id`` as its terms, each a field of ``valid`` with an optional '-'; any
    other is a 400 naming the parameter. An empty value orders nothing."""
    if not value:
        return []
    terms = [term.strip() for term in value.split(",")]
    unknown = [term for term in terms if term.removeprefix("-") not in valid]
    if unknown:
        choices = ", ".join(valid) or "none"
        raise ValidationError({parameter: [f"Cannot order by {unknown[0]!r}; use {choices}."]})
    return terms


def ordering_schema(valid: list[str]) -> dict:
    """The OpenAPI schema of an ordering parameter: a comma-separated list of these values."""
    values = [f"{sign}{name}" for name in valid for sign in ("", "-")]
    return {"type": "array", "items": {"type": "string", "enum": values}}


class OrderingFilter(filters.OrderingFilter):
    """``?ordering=`` by the fields the list declares in ``ordering_fields``, as the schema
    lists them; any other field is a 400 (DRF's own filter drops it silently)."""

    def get_ordering(self, request, queryset, view):
        value = request.query_params.get(self.ordering_param)
        terms = ordering_terms(value, _ordering_fields(view), self.ordering_param)
        return terms or self.get_default_ordering(view)

    def get_valid_fields(self, queryset, view, context=None) -> list[tuple[str, str]]:
        return [(name, name) for name in _ordering_fields(view)]

    def get_schema_operation_parameters(self, view) -> list[dict]:
        valid = _ordering_fields(view)
        if not valid:
            return []
        return [
            {
                "name": self.ordering_param,
                "required": False,
                "in": "query",
                "description": ORDERING_DESCRIPTION,
                "schema": ordering_schema(valid),
                "style": "form",
                "explode": False,
            }
        ]


def _ordering_fields(view) -> list[str]:
    fields = getattr(view, "ordering_fields", None)
    return list(fields) if isinstance(fields, (list, tuple)) else []


class SearchFilter(filters.SearchFilter):
    """``?q=`` for lists that declare ``search_fields``; on others it is not a parameter."""

    def get_schema_operation_parameters(self, view) -> list[dict]:
        if not getattr(view, "search_fields", None):
            return []
        return super().get_schema_operation_parameters(view)
