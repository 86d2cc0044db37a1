"""Blazar's request plumbing: X-Auth-Token authentication, JSON only, and every error as
``{"error_code", "error_message", "error_name"}`` (what Blazar's clients print)."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import APIException, NotFound, ParseError

from openstack.errors import describe
from openstack.views import OpenStackView
from project.api.errors import exception_handler

NAMES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "CONFLICT",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "TOO_MANY_REQUESTS",
}


def error_body(status: int, message: str) -> dict:
    return {"error_code": status, "error_message": message, "error_name": NAMES.get(status, status)}


def blazar_exception_handler(exc, context):
    response = exception_handler(exc, context)
    if response is not None:
        data = response.data
        if isinstance(data, dict) and "detail" in data:
            data = {"detail": data["detail"]}  # Blazar's body has no room for Corral's details
        response.data = error_body(response.status_code, "; ".join(describe(data)))
    return response


class BlazarView(OpenStackView):
    """A Blazar endpoint: authenticated by X-Auth-Token, JSON in and out, Blazar's errors.

    Left out of Corral's OpenAPI schema: this API is Blazar's, documented by OpenStack.
    """

    def get_exception_handler(self):
        return blazar_exception_handler

    def body(self) -> dict:
        """The request's JSON object (a list or a bare value is a 400)."""
        data = self.request.data
        if not isinstance(data, dict):
            raise ParseError("The request body must be a JSON object.")
        return data


@csrf_exempt
def not_found(request, *args, **kwargs):
    """Any other URL under /reservation: Blazar's 404, never a page."""
    return JsonResponse(error_body(404, f"{request.path} not found."), status=404)


def missing(kind: str, ident) -> NotFound:
    return NotFound(f"{kind} {ident} not found.")


class BlazarError(APIException):
    """One of Blazar's own exceptions (blazar/exceptions.py, blazar/manager/exceptions.py):
    its HTTP code and its message word for word, so Blazar's clients print what Blazar says."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status


# Blazar's date format for lease dates (blazar/manager/service.py LEASE_DATE_FORMAT).
LEASE_DATE_FORMAT = "%Y-%m-%d %H:%M"


def policy_refused(action: str) -> BlazarError:
    """PolicyNotAuthorized: the caller's role does not allow ``action``
    (``blazar:<api>:<verb>``, as Blazar's policies name it)."""
    return BlazarError(403, f"Policy doesn't allow {action} to be performed")


def invalid_input(message: str) -> BlazarError:
    return BlazarError(400, message)


def invalid_date(text) -> BlazarError:
    return BlazarError(400, f"{text} is an invalid date. Required format: {LEASE_DATE_FORMAT}")


def missing_parameter(param: str) -> BlazarError:
    return BlazarError(400, f"Missing parameter {param}")


def malformed_parameter(param: str) -> BlazarError:
    return BlazarError(400, f"Malformed parameter {param}")


def malformed_requirements(requirements) -> BlazarError:
    return BlazarError(400, f"Malformed requirements {requirements}")
