"""Nova's request plumbing: X-Auth-Token authentication, microversions, JSON in and out, and
every error in Nova's shape, ``{"itemNotFound": {"code": 404, "message": "..."}}``.

A request names its microversion in ``OpenStack-API-Version: compute 2.x`` (or the older
``X-OpenStack-Nova-API-Version: 2.x``); without one it gets 2.1, with ``latest`` the newest
Corral serves. Every answer names the version it was shaped for, as Nova's do.
"""

from __future__ import annotations

import re

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.exceptions import (
    APIException,
    NotFound,
    ParseError,
    PermissionDenied,
    ValidationError,
)
from rest_framework.negotiation import DefaultContentNegotiation

from openstack.errors import describe
from openstack.views import OpenStackView
from project.access.permissions import holds_at_system
from project.api.errors import exception_handler

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 37)
VERSION_HEADERS = ("OpenStack-API-Version", "X-OpenStack-Nova-API-Version")

# The key of Nova's error bodies by status (nova.api.openstack.wsgi's faults).
FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    406: "notAcceptable",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
}


def version_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


class VersionNotSupported(APIException):
    status_code = status.HTTP_406_NOT_ACCEPTABLE


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT


def requested_version(request) -> tuple[int, int]:
    """The microversion a request asks for (2.1 when it names none)."""
    given = None
    header = request.headers.get("OpenStack-API-Version", "")
    for item in header.split(","):
        service, _, value = item.strip().partition(" ")
        if service.lower() == "compute":
            given = value.strip()
    if given is None:
        given = request.headers.get("X-OpenStack-Nova-API-Version")
    if not given:
        return MIN_VERSION
    if given.lower() == "latest":
        return MAX_VERSION
    match = re.fullmatch(r"([1-9]\d{0,2})\.(0|[1-9]\d{0,2})", given.strip())
    if match is None:
        raise ParseError(
            f"API Version String {given} is of invalid format. Must be of format MajorNum.MinorNum."
        )
    version = (int(match[1]), int(match[2]))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise VersionNotSupported(
            f"Version {given} is not supported by the API. Minimum is "
            f"{version_text(MIN_VERSION)} and maximum is {version_text(MAX_VERSION)}."
        )
    return version


def fault(status_code: int, message: str) -> dict:
    return {FAULT_NAMES.get(status_code, "computeFault"): {"code": status_code, "message": message}}


def nova_exception_handler(exc, context):
    response = exception_handler(exc, context)
    if response is None:
        return None
    if response.status_code == 401:
        # What keystonemiddleware answers before Nova sees the request.
        response.data = {
            "error": {
                "code": 401,
                "title": "Unauthorized",
                "message": "The request you have made requires authentication.",
            }
        }
        return response
    message = "; ".join(describe(response.data))
    if isinstance(exc, ValidationError):
        message = f"Invalid input for field/attribute {message}"
    response.data = fault(response.status_code, message)
    return response


class AlwaysJSON(DefaultContentNegotiation):
    """Nova answers JSON whatever the Accept header asks (openstacksdk sends odd ones, e.g. for
    a console log)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class NovaView(OpenStackView):
    """A Compute API endpoint: authenticated by X-Auth-Token, JSON in and out, Nova's errors,
    shaped for the request's microversion (``self.version``).

    Left out of Corral's OpenAPI schema: this API is Nova's, documented by OpenStack.
    """

    content_negotiation_class = AlwaysJSON
    version: tuple[int, int] = MIN_VERSION

    def get_exception_handler(self):
        return nova_exception_handler

    def initial(self, request, *args, **kwargs):
        self.version = MIN_VERSION
        super().initial(request, *args, **kwargs)
        self.version = requested_version(request)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        text = version_text(self.version)
        response["OpenStack-API-Version"] = f"compute {text}"
        response["X-OpenStack-Nova-API-Version"] = text
        response["Vary"] = ", ".join(VERSION_HEADERS)
        return response

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= (major, minor)

    def body(self, key: str) -> dict:
        """The object under ``key`` in the request's JSON body (anything else is a 400)."""
        data = self.request.data
        if not isinstance(data, dict) or not isinstance(data.get(key), dict):
            raise ValidationError({key: f"'{key}' is a required property and must be an object."})
        return data[key]


@csrf_exempt
def not_found(request, *args, **kwargs):
    """Any other URL under /compute: Nova's 404, never a page."""
    return JsonResponse(fault(404, "The resource could not be found."), status=404)


def policy_refused(rule: str) -> PermissionDenied:
    """Nova's 403 for a policy rule the caller does not pass (``os_compute_api:...``)."""
    return PermissionDenied(f"Policy doesn't allow {rule} to be performed.")


def missing(message: str) -> NotFound:
    return NotFound(message)


def is_admin(user) -> bool:
    return user.is_superuser or holds_at_system(user, "hosts.change_host")


def admin_only(user, action: str) -> None:
    """Nova's policy check, made before any lookup."""
    if not is_admin(user):
        raise policy_refused(action)
