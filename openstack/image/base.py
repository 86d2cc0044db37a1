"""Glance's request plumbing: X-Auth-Token authentication, JSON, and every error as webob
answers Glance's JSON clients, ``{"message", "code": "404 Not Found", "title"}`` (the
message is what openstacksdk and the CLI print)."""

from __future__ import annotations

from http import HTTPStatus

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response

from hosts.error_codes import HostErrorCode
from openstack.errors import describe
from openstack.views import OpenStackView
from project.api.errors import exception_handler
from project.errors import Refused

# Corral's field names in refusals of the use cases below, as Glance calls them.
GLANCE_FIELDS = {"format": "disk_format", "file": "data"}


class GlanceRefusal(Exception):
    """What Glance's rules refuse, with Glance's status for it."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code, self.message = status_code, message


def error_body(status_code: int, message: str) -> dict:
    title = HTTPStatus(status_code).phrase
    return {"message": message, "code": f"{status_code} {title}", "title": title}


def glance_exception_handler(exc, context):
    if isinstance(exc, GlanceRefusal):
        return Response(error_body(exc.status_code, exc.message), status=exc.status_code)
    if isinstance(exc, Refused):
        field = GLANCE_FIELDS.get(exc.field, exc.field)
        message = f"{field}: {exc.message}" if field else exc.message
        code = status.HTTP_409_CONFLICT if field is None else status.HTTP_400_BAD_REQUEST
        # Glance's own answer to an upload past a size or quota limit.
        if exc.code in (HostErrorCode.IMAGE_TOO_BIG, HostErrorCode.QUOTA_EXCEEDED):
            code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        return Response(error_body(code, message), status=code)
    response = exception_handler(exc, context)
    if response is not None:
        message = "; ".join(describe(response.data))
        response.data = error_body(response.status_code, message)
    return response


class AnyAccept(DefaultContentNegotiation):
    """Glance answers JSON (or an image's bytes) whatever ``Accept`` says: clients send
    ``Accept: application/octet-stream`` for data and nothing in particular elsewhere."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class GlanceView(OpenStackView):
    """A Glance endpoint: authenticated by X-Auth-Token, JSON in and out, Glance's errors.

    Left out of Corral's OpenAPI schema: this API is Glance's, documented by OpenStack.
    A view that streams its body (an image's data) sets ``streams_body``; any other body is
    read within Django's limit on request bodies (a 413 past it).
    """

    content_negotiation_class = AnyAccept
    streams_body = False

    def get_exception_handler(self):
        return glance_exception_handler

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if not self.streams_body and request.method not in ("GET", "HEAD", "DELETE"):
            request._request.body  # noqa: B018 - reading it applies Django's size limit

    def body(self):
        """The request's JSON document."""
        try:
            return self.request.data
        except APIException:
            raise
        except ValueError as exc:
            raise ParseError(f"The body is not valid JSON: {exc}") from None


@csrf_exempt
def not_found(request, *args, **kwargs):
    """Any other URL under /image: Glance's 404 in JSON, never a page."""
    return JsonResponse(error_body(404, f"{request.path} was not found."), status=404)
