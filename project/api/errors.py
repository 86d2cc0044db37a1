"""Every API error is JSON: ``{"field": ["message", ...]}`` for bad fields, else
``{"detail": "..."}``.

Model validation errors become 400s with field messages; deleting something still in use
(PROTECT) and write conflicts become 409s, so bad input never surfaces as a 500. A field's
messages are always a list, however the view raised them; messages about the request as a
whole are "non_field_errors", as a serializer reports them. ``project/api/schema.py``
documents these shapes.
"""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError, RestrictedError
from django.http import JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


def _describe_protected(exc: ProtectedError | RestrictedError) -> str:
    objects = list(
        exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
    )
    kinds = sorted({str(obj._meta.verbose_name_plural) for obj in objects})
    names = ", ".join(str(obj) for obj in objects[:5])
    more = f" and {len(objects) - 5} more" if len(objects) > 5 else ""
    return f"Still in use by {' and '.join(kinds)}: {names}{more}. Remove or move them first."


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, (ProtectedError, RestrictedError)):
        exc = Conflict(_describe_protected(exc))
    elif isinstance(exc, IntegrityError):
        exc = Conflict("The change conflicts with another object (a name or value already in use).")
    if isinstance(exc, exceptions.ValidationError):
        exc = exceptions.ValidationError(_field_messages(exc.detail))
    response = drf_exception_handler(exc, context)
    if response is not None and not isinstance(response.data, dict):
        response = Response({"detail": response.data}, status=response.status_code)
    return response


def _field_messages(detail):
    """``{"field": "message"}`` as ``{"field": ["message"]}``, a bare list of messages under
    "non_field_errors"; a lone "detail" message stays a message about the whole request."""
    if isinstance(detail, list):
        return {api_settings.NON_FIELD_ERRORS_KEY: detail}
    return {
        field: [messages] if isinstance(messages, str) and field != "detail" else messages
        for field, messages in detail.items()
    }


def not_found(request, exception=None):
    """Django's 404 for a URL no route matches: JSON under /api/ (clients parse every error
    there), the usual page elsewhere."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
