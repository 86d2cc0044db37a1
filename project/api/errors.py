"""Every API error is JSON: ``{"field": ["message", ...]}`` for bad fields, else
``{"detail": "..."}``.

Model validation errors become 400s with field messages; a use case's refusal
(``project.errors.Refused``) a 409 (its details beside "detail"), or a 400 on its field when it
names one; deleting something still in use (PROTECT) and write conflicts become 409s, so bad
input never surfaces as a 500. A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413. What
Django refuses before any API view runs (a ``Host`` header not in ALLOWED_HOSTS, a path no
route matches) is JSON under /api/ too, through ``handler400``, ``handler404`` and the
catch-all route ``unknown_path``.
A field's messages are always a list, however the view raised them; messages about the
request as a whole are "non_field_errors", as a serializer reports them.
``project/api/schema.py`` documents these shapes.
"""

from django.conf import settings
from django.core.exceptions import (
    DisallowedHost,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError, RestrictedError
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.defaults import bad_request, page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from project.errors import Refused


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def too_large_message() -> str:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return f"The request body is larger than {limit // 1024} KiB."


def refusal_message(exc: SuspiciousOperation) -> str:
    """What to tell a client about a request Django refused to read (Django's own messages
    name settings and advise the server's administrator)."""
    if isinstance(exc, DisallowedHost):
        return "This server does not answer for that host."
    if isinstance(exc, TooManyFieldsSent):
        return f"Too many parameters or fields (at most {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS})."
    if isinstance(exc, TooManyFilesSent):
        return f"Too many files (at most {settings.DATA_UPLOAD_MAX_NUMBER_FILES})."
    return "The request cannot be read."


def _describe_protected(exc: ProtectedError | RestrictedError) -> str:
    objects = list(
        exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
    )
    kinds = sorted({str(obj._meta.verbose_name_plural) for obj in objects})
    names = ", ".join(str(obj) for obj in objects[:5])
    more = f" and {len(objects) - 5} more" if len(objects) > 5 else ""
    return f"Still in use by {' and '.join(kinds)}: {names}{more}. Remove or move them first."


def exception_handler(exc, context):
    details = exc.details if isinstance(exc, Refused) and not exc.field else {}
    if isinstance(exc, Refused):
        if exc.field:
            exc = exceptions.ValidationError({exc.field: [exc.message]}, code=exc.code)
        else:
            exc = Conflict(exc.message, code=exc.code)
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, (ProtectedError, RestrictedError)):
        exc = Conflict(_describe_protected(exc))
    elif isinstance(exc, IntegrityError):
        exc = Conflict("The change conflicts with another object (a name or value already in use).")
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(too_large_message())
    elif isinstance(exc, SuspiciousOperation):
        exc = exceptions.ParseError(refusal_message(exc))
    if isinstance(exc, exceptions.ValidationError):
        exc = exceptions.ValidationError(_field_messages(exc.detail))
    response = drf_exception_handler(exc, context)
    if response is not None and not isinstance(response.data, dict):
        response = Response({"detail": response.data}, status=response.status_code)
    if response is not None and details:
        response.data = {**response.data, **details}
    return response


def _is_api(request) -> bool:
    return request.path_info.startswith("/api/")


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
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


def refused_request(request, exception=None):
    """Django's 400 for a request it refuses before any view runs (a ``Host`` header not in
    ALLOWED_HOSTS, a body too large for a form): JSON under /api/, the usual page elsewhere."""
    if not _is_api(request):
        return bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse({"detail": too_large_message()}, status=413)
    if isinstance(exception, SuspiciousOperation):
        return JsonResponse({"detail": refusal_message(exception)}, status=400)
    return JsonResponse({"detail": "Bad request."}, status=400)


@csrf_exempt
def unknown_path(request, *args, **kwargs):
    """Every /api/ path no API route matches, whatever the method: a JSON 404. Being a route,
    it also keeps CommonMiddleware from redirecting ``/api/clusters`` to ``/api/clusters/``
    (a redirect a POST cannot follow, and a RuntimeError under DEBUG) and answers JSON under
    DEBUG, where Django's own 404 page would be HTML."""
    return JsonResponse({"detail": "Not found."}, status=404)
