"""Keystone's request plumbing: every error in Keystone's shape, ``{"error": {"code",
"message", "title"}}`` (``KeystoneError``), the base view that answers them and finds the
caller's token, JSON bodies read as Keystone reads them, and the ``X-Auth-Token``
authentication the other OpenStack APIs use."""

from __future__ import annotations

from django.http import JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed

from openstack.identity import services
from openstack.identity.catalog import base_url
from project import json_input

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    429: "Too Many Requests",
}


class KeystoneError(Exception):
    """An error in Keystone's shape: ``{"error": {"code", "message", "title"}}`` (not one of
    Corral's refusals, ``project.errors.Refused``, which a view turns into one)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after

    def response(self) -> JsonResponse:
        body = {"code": self.status, "message": self.message, "title": TITLES[self.status]}
        response = JsonResponse({"error": body}, status=self.status)
        if self.status == 401:
            response["WWW-Authenticate"] = "Keystone"
        if self.retry_after is not None:
            response["Retry-After"] = str(self.retry_after)
        return response


@method_decorator(csrf_exempt, name="dispatch")
class KeystoneView(View):
    """Answers every error in Keystone's shape; never a page."""

    needs_token = True

    def dispatch(self, request, *args, **kwargs):
        try:
            if self.needs_token:
                token = services.find_token(request.headers.get("X-Auth-Token"))
                if token is None:
                    raise KeystoneError(401, "The request you have made requires authentication.")
                request.keystone_token = token
            return super().dispatch(request, *args, **kwargs)
        except KeystoneError as error:
            return error.response()

    def http_method_not_allowed(self, request, *args, **kwargs):
        raise KeystoneError(405, f"{request.method} is not allowed here.")


def json_body(request) -> dict:
    try:
        body = json_input.loads(request.body or b"{}")
    except json_input.NotJSON:
        raise KeystoneError(400, "The request body is not valid JSON.") from None
    except json_input.OutOfLimits as exc:
        raise KeystoneError(400, f"The request body is refused: {exc}") from None
    if not isinstance(body, dict):
        raise KeystoneError(400, "The request body must be a JSON object.")
    return body


def json_object(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KeystoneError(400, f"{where} must be an object.")
    return value


def own_user(request, ident: str):
    """The caller, when ``ident`` is their id (a user sees only themself here)."""
    user = request.keystone_token.user
    if ident != str(user.pk):
        raise KeystoneError(404, f"Could not find {ident}.")
    return user


class KeystoneTokenAuthentication(BaseAuthentication):
    """``X-Auth-Token: <token>`` for the other OpenStack APIs (DRF views): a Keystone log-in's
    token (for a password or an application credential) or a Corral API token authenticates
    the request as its user (project/access/tokens.py finds it, in one query). No session:
    CSRF never applies."""

    def authenticate(self, request):
        key = request.META.get("HTTP_X_AUTH_TOKEN", "").strip()
        if not key:
            return None
        found = services.find_token(key)
        if found is None:
            # Unknown, expired, revoked, or of a deactivated user: DRF's words for it.
            raise AuthenticationFailed("Invalid token.")
        return found.user, found

    def authenticate_header(self, request) -> str:
        # What keystonemiddleware answers: where to get a token.
        return f'Keystone uri="{base_url(request)}/identity/v3"'
