"""The OpenAPI schema as the API really answers (``DEFAULT_SCHEMA_CLASS``).

drf-spectacular describes the success answers from the serializers; ``CorralAutoSchema`` adds
what it cannot see:

- every error an operation can answer, with the JSON body the API sends (``errors.py``):
  400 for any operation taking query parameters or a body, 401 for all, 403 for writes, 404
  for any operation on a path naming an object, 409 for writes, 413 and 415 for any body, the
  statuses a view declares itself (``extend_schema(responses={429: ...})``) with that body;
- ``null`` and ``""`` where the database holds them: a read-only field whose source goes
  through a nullable column is nullable, a read-only choice of a column that may be blank
  lists ``""``;
- pagination and list filters only where the rows are paginated: the ``list`` action of a
  paginated view, never a custom action answering with a plain list;
- a serializer's own docstring as its description, never one inherited from a base class;
- the registered refusal codes (``project.error_codes``) as the ``RefusalCode`` component.
"""

from __future__ import annotations

from django.core.exceptions import FieldDoesNotExist
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, is_patched_serializer
from rest_framework import serializers

from project.error_codes import refusal_codes

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}

DETAIL = {
    "type": "object",
    "description": 'What went wrong, in words: {"detail": "..."}.',
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
FIELD_ERRORS = {
    "type": "object",
    "description": (
        'Messages per field: {"field": ["message", ...]}; "non_field_errors" holds those about'
        " the request as a whole. A nested field holds the errors of its own fields, a list of"
        " objects one entry per item (empty for the items without errors)."
    ),
    "additionalProperties": {
        "anyOf": [
            {
                "type": "array",
                "items": {
                    "anyOf": [{"type": "string"}, {"$ref": "#/components/schemas/FieldErrors"}]
                },
            },
            {"$ref": "#/components/schemas/FieldErrors"},
        ]
    },
}
HEADERS = {
    401: {
        "WWW-Authenticate": {
            "description": "How to authenticate: Token.",
            "required": True,
            "schema": {"type": "string"},
        }
    },
    429: {
        "Retry-After": {
            "description": "Seconds to wait before trying again.",
            "required": True,
            "schema": {"type": "integer", "minimum": 0},
        }
    },
}
HEADERS[503] = HEADERS[429]
# Status -> (component name, description, body).
ERRORS = {
    400: (
        "BadRequest",
        "Bad input: messages per field of the body, or about a query parameter.",
        {
            "anyOf": [
                {"$ref": "#/components/schemas/FieldErrors"},
                {"$ref": "#/components/schemas/Error"},
            ]
        },
    ),
    401: ("Unauthorized", "No credentials, or credentials that are not valid.", DETAIL),
    403: (
        "Forbidden",
        "The caller may not do this (or a session write lacks its CSRF token); a refusal of one"
        " field the caller may not change names it (a user's own username).",
        {
            "anyOf": [
                {"$ref": "#/components/schemas/Error"},
                {"$ref": "#/components/schemas/FieldErrors"},
            ]
        },
    ),
    404: ("NotFound", "No such object, or one the caller may not see.", DETAIL),
    409: (
        "Conflict",
        "Refused in the current state: the object is in use, busy, or a name is taken.",
        DETAIL,
    ),
    413: ("PayloadTooLarge", "The request body is too large.", DETAIL),
    415: (
        "UnsupportedMediaType",
        "The body is not in a media type the operation reads (see its request body).",
        DETAIL,
    ),
    429: ("TooManyRequests", "Too many attempts; try again after Retry-After seconds.", DETAIL),
    503: (
        "ServiceUnavailable",
        "The server is at its limit, or cannot reach its database, for now; try again "
        "after Retry-After seconds.",
        DETAIL,
    ),
}


class CorralAutoSchema(AutoSchema):
    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        responses = operation["responses"]
        for status in sorted(error_statuses(operation, self.method) | _declared(responses)):
            declared = responses.get(str(status), {})
            if "content" not in declared and "$ref" not in declared:
                responses[str(status)] = self._error_response(status)
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _error_response(self, status: int) -> dict:
        name, description, body = ERRORS[status]
        self._register("Error", ResolvedComponent.SCHEMA, DETAIL)
        self._register("FieldErrors", ResolvedComponent.SCHEMA, FIELD_ERRORS)
        response = {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        if body is not DETAIL:
            response["content"]["application/json"]["schema"] = body
        if status in HEADERS:
            response["headers"] = HEADERS[status]
        return self._register(name, ResolvedComponent.RESPONSE, response)

    def _register(self, name: str, kind: str, schema: dict) -> dict:
        component = ResolvedComponent(name=name, type=kind, object=f"corral-{name}", schema=schema)
        self.registry.register_on_missing(component)
        return component.ref

    def _get_paginator(self):
        if not self._lists_rows():
            return None
        return super()._get_paginator()

    def get_filter_backends(self):
        if not self._lists_rows():
            return []
        return super().get_filter_backends()

    def _lists_rows(self) -> bool:
        """Whether the operation is a list of rows (filtered, ordered, paginated): the
        ``list`` action, not an action that happens to answer with a list."""
        action = getattr(self.view, "action", None)
        return self.method == "GET" and (action is None or action == "list")

    def _get_serializer_field_meta(self, field, direction):
        meta = super()._get_serializer_field_meta(field, direction)
        if direction == "response" and field.read_only and _may_be_null(field):
            meta["nullable"] = True
        return meta

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (
            isinstance(schema, dict)
            and "enum" in schema
            and "" not in schema["enum"]
            and field.read_only
            and _may_be_blank(field)
        ):
            schema["enum"] = [*schema["enum"], ""]
        return schema

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        own = type(serializer).__dict__.get("__doc__")
        if not own:
            schema.pop("description", None)
        extra = getattr(serializer, "schema_constraints", None)
        if extra and direction == "request" and not is_patched_serializer(serializer, direction):
            schema.update(extra)
        return schema


def error_statuses(operation: dict, method: str) -> set[int]:
    """The error statuses every operation of this shape can answer."""
    locations = {parameter["in"] for parameter in operation.get("parameters", [])}
    has_body = "requestBody" in operation
    # Every operation refuses a query parameter it does not take and an oversized body
    # (project/api/middleware.py), whatever it documents of its own, and answers 503 while the
    # database cannot be reached (project/web/database_down.py).
    statuses = {400, 401, 413, 503}
    if method not in SAFE_METHODS:
        statuses |= {403, 409}
    if "path" in locations:
        statuses.add(404)
    if has_body:
        statuses.add(415)
    return statuses


def _declared(responses: dict) -> set[int]:
    return {int(code) for code in responses if code.isdigit() and int(code) in ERRORS}


def _model_fields(field) -> list:
    """The columns ``field``'s source goes through, from its serializer's model (up to a
    many-valued relation, whose emptiness is an empty list, never a null)."""
    # Fields drf-spectacular builds from a model field on its own have no serializer.
    parent = getattr(field, "parent", None)
    model = getattr(getattr(parent, "Meta", None), "model", None)
    found = []
    for attr in getattr(field, "source_attrs", []) if model is not None else []:
        if model is None:
            break
        try:
            model_field = model._meta.get_field(attr)
        except FieldDoesNotExist:
            break
        if model_field.many_to_many or model_field.one_to_many:
            break
        found.append(model_field)
        model = model_field.related_model
    return found


def _may_be_null(field) -> bool:
    return any(model_field.null for model_field in _model_fields(field))


def _may_be_blank(field) -> bool:
    found = _model_fields(field)
    return (
        isinstance(field, serializers.ChoiceField)
        and bool(found)
        and found[-1].blank
        and len(found) == len(getattr(field, "source_attrs", ()))
    )


def add_refusal_codes(result, generator, request, public):
    """Add ``RefusalCode``: every code a refusal (``project.errors.Refused``) may have, by app,
    with what each means (a postprocessing hook, ``SPECTACULAR_SETTINGS``)."""
    lines, codes = [], []
    for app, enum in refusal_codes().items():
        for member in enum:
            lines.append(f"* `{member.value}` ({app}): {member.meaning}")
            codes.append(member.value)
    result.setdefault("components", {}).setdefault("schemas", {})["RefusalCode"] = {
        "type": "string",
        "enum": sorted(set(codes)),
        "description": (
            "Why Corral refused an operation, one stable code per reason (docs/error-codes.md)."
            ' A refusal answers a 409 with its message in "detail", or a 400 with the message'
            " on the field at fault; the code itself is not in that body.\n\n" + "\n".join(lines)
        ),
    }
    return result
