"""Keystone v3 as OpenStack clients use it: the version document, log-in by password or
application credential (``POST /auth/tokens``), token validation and revocation, the
caller's own project and catalog, and users (the caller themself; anyone, for an admin)
(application credentials themselves: credential_views.py).

A Corral user is a Keystone user in the domain ``Default`` with one project of their own,
named after them; each log-in gives a token of its own, which expires after
``CORRAL_KEYSTONE_TOKEN_MINUTES`` and which revoking ends alone (identity/tokens.py). A
password log-in's token opens Corral's own API too; an application credential's acts as its
owner on the OpenStack APIs only, until it expires or the credential is deleted. Every secret
check goes through the log-in lockout.
"""

from __future__ import annotations

import math
from datetime import UTC

from django.contrib.auth import get_user_model
from django.http import HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from openstack.identity import application_credentials as credentials
from openstack.identity import tokens
from openstack.identity.catalog import base_url, catalog
from openstack.identity.tokens import IdentityToken
from project import json_input, lockout
from project.permissions import holds_at_system

VERSION_ID = "v3.14"
DOMAIN = {"id": "default", "name": "Default"}
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    429: "Too Many Requests",
}


class Refused(Exception):
    """An error in Keystone's shape: ``{"error": {"code", "message", "title"}}``."""

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


def _time(moment) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def user_view(user) -> dict:
    return {"id": str(user.pk), "name": user.username, "domain": DOMAIN}


def project_view(request, user) -> dict:
    """The user's own project (Corral has none: each user is their own)."""
    url = f"{base_url(request)}/identity/v3/projects/{user.pk}"
    return {
        "id": str(user.pk),
        "name": user.username,
        "domain_id": DOMAIN["id"],
        "description": f"{user.username}'s own project",
        "enabled": True,
        "is_domain": False,
        "parent_id": DOMAIN["id"],
        "tags": [],
        "links": {"self": url},
    }


def is_admin(user) -> bool:
    """Whether ``user`` holds Keystone's admin role: a superuser or a system-wide admin."""
    return user.is_superuser or holds_at_system(user, "hosts.change_host")


def roles_of(user) -> list[dict]:
    names = ["reader", "member"]
    if is_admin(user):
        names.append("admin")
    return [{"id": name, "name": name} for name in names]


def token_body(request, token: IdentityToken, methods: list[str]) -> dict:
    user = token.user
    body = {
        "methods": methods,
        "user": {**user_view(user), "password_expires_at": None},
        "project": {"id": str(user.pk), "name": user.username, "domain": DOMAIN},
        "roles": roles_of(user),
        "is_domain": False,
        "audit_ids": [token.audit_id],
        "issued_at": _time(token.issued_at),
        "expires_at": _time(token.expires_at),
        "catalog": catalog(request),
    }
    if token.credential is not None:
        body["application_credential"] = {
            "id": token.credential.id,
            "name": token.credential.name,
            "restricted": not token.credential.unrestricted,
        }
    return {"token": body}


def version_view(request) -> dict:
    return {
        "id": VERSION_ID,
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": f"{base_url(request)}/identity/v3/"}],
        "media-types": [
            {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
        ],
    }


@method_decorator(csrf_exempt, name="dispatch")
class KeystoneView(View):
    """Answers every error in Keystone's shape; never a page."""

    needs_token = True

    def dispatch(self, request, *args, **kwargs):
        try:
            if self.needs_token:
                token = tokens.find(request.headers.get("X-Auth-Token"))
                if token is None:
                    raise Refused(401, "The request you have made requires authentication.")
                request.keystone_token = token
            return super().dispatch(request, *args, **kwargs)
        except Refused as refused:
            return refused.response()

    def http_method_not_allowed(self, request, *args, **kwargs):
        raise Refused(405, f"{request.method} is not allowed here.")


class VersionsView(KeystoneView):
    """``GET /identity``: the versions offered (only v3)."""

    needs_token = False

    def get(self, request):
        return JsonResponse({"versions": {"values": [version_view(request)]}}, status=300)


class VersionView(KeystoneView):
    """``GET /identity/v3``: the version document clients discover first."""

    needs_token = False

    def get(self, request):
        return JsonResponse({"version": version_view(request)})


def _json_body(request) -> dict:
    try:
        body = json_input.loads(request.body or b"{}")
    except json_input.NotJSON:
        raise Refused(400, "The request body is not valid JSON.") from None
    except json_input.OutOfLimits as exc:
        raise Refused(400, f"The request body is refused: {exc}") from None
    if not isinstance(body, dict):
        raise Refused(400, "The request body must be a JSON object.")
    return body


def _object(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused(400, f"{where} must be an object.")
    return value


def _check_domain(domain: dict, where: str) -> None:
    if not domain:
        raise Refused(400, f"{where} needs a domain (Default).")
    name, ident = domain.get("name"), domain.get("id")
    if (name is not None and name != DOMAIN["name"]) or (ident is not None and ident != "default"):
        raise Refused(401, f"Unknown domain {name or ident!r}: Corral's users are in Default.")


def _password_user(request, identity: dict):
    """The user a password log-in names, checked through the lockout."""
    user_spec = _object(_object(identity.get("password"), "password").get("user"), "user")
    password = user_spec.get("password")
    if not isinstance(password, str) or not password:
        raise Refused(400, "A password log-in needs user.password.")
    if user_spec.get("name") is not None:
        _check_domain(_object(user_spec.get("domain"), "user.domain"), "user")
        username = str(user_spec["name"])
    elif user_spec.get("id") is not None:
        ident = str(user_spec["id"])
        known = ident.isdigit() and len(ident) < 19
        found = get_user_model().objects.filter(pk=int(ident)) if known else None
        username = found.values_list("username", flat=True).first() if found else None
        if username is None:
            raise Refused(401, "The request you have made requires authentication.")
    else:
        raise Refused(400, "A password log-in names the user by name (with a domain) or id.")
    try:
        user = lockout.authenticate(request, username, password)
    except lockout.LockedOut as locked:
        raise Refused(429, str(locked), retry_after=math.ceil(locked.seconds)) from None
    if user is None:
        raise Refused(401, "The request you have made requires authentication.")
    return user


def _check_scope(user, scope: dict) -> None:
    """Only the user's own project (what an unscoped log-in gets too)."""
    if not scope:
        return
    project = _object(scope.get("project"), "scope.project")
    if not project:
        raise Refused(401, "Corral offers project scopes only: the project named after you.")
    if project.get("id") is not None:
        if str(project["id"]) != str(user.pk):
            raise Refused(401, f"You have no access to project {project['id']}.")
        return
    _check_domain(_object(project.get("domain"), "scope.project.domain"), "scope.project")
    if project.get("name") != user.username:
        raise Refused(
            401,
            f"You have no access to project {project.get('name')!r}; "
            f"your project is {user.username!r}.",
        )


def _credential(request, identity: dict):
    """The application credential a log-in names, its secret checked through the lockout."""
    spec = _object(identity.get("application_credential"), "application_credential")
    secret = spec.get("secret")
    if not isinstance(secret, str) or not secret:
        raise Refused(400, "An application credential log-in needs application_credential.secret.")
    if spec.get("id") is not None:
        credential = credentials.by_id(str(spec["id"]))
        who = credential.owner.username if credential else f"application credential {spec['id']}"
    elif spec.get("name") is not None:
        owner = _credential_owner(_object(spec.get("user"), "application_credential.user"))
        credential = credentials.by_name(owner, str(spec["name"])) if owner else None
        who = owner.username if owner else f"application credential {spec['name']}"
    else:
        raise Refused(
            400, "An application credential log-in names it by id, or by name with its user."
        )
    try:
        found = lockout.attempt(request, who, lambda: credentials.check(credential, secret))
    except lockout.LockedOut as locked:
        raise Refused(429, str(locked), retry_after=math.ceil(locked.seconds)) from None
    if found is None:
        raise Refused(401, "The request you have made requires authentication.")
    return found


def _credential_owner(user_spec: dict):
    """The user an application credential named by name belongs to (by id, or name+domain)."""
    users = get_user_model().objects
    if user_spec.get("id") is not None:
        ident = str(user_spec["id"])
        return users.filter(pk=int(ident)).first() if ident.isdigit() and len(ident) < 19 else None
    if user_spec.get("name") is not None:
        _check_domain(_object(user_spec.get("domain"), "user.domain"), "user")
        return users.filter(username=str(user_spec["name"])).first()
    raise Refused(400, "An application credential named by name needs its user (id or name).")


class TokensView(KeystoneView):
    """``/identity/v3/auth/tokens``: log in (POST), validate (GET, HEAD), revoke (DELETE)."""

    needs_token = False

    def post(self, request):
        auth = _object(_json_body(request).get("auth"), "auth")
        identity = _object(auth.get("identity"), "auth.identity")
        methods = identity.get("methods")
        if not isinstance(methods, list) or not methods:
            raise Refused(400, "auth.identity.methods is required.")
        if methods == ["password"]:
            token = tokens.for_password(_password_user(request, identity))
        elif methods == ["token"]:
            given = _object(identity.get("token"), "token").get("id")
            token = tokens.find(given if isinstance(given, str) else None)
            if token is None:
                raise Refused(401, "The request you have made requires authentication.")
        elif methods == ["application_credential"]:
            token = tokens.for_credential(_credential(request, identity))
        else:
            raise Refused(
                401,
                f"Unsupported authentication method {methods!r}: "
                "use password or application_credential.",
            )
        _check_scope(token.user, _object(auth.get("scope"), "auth.scope"))
        response = JsonResponse(token_body(request, token, methods), status=201)
        response["X-Subject-Token"] = token.key
        return response

    def _subject(self, request) -> IdentityToken:
        caller = tokens.find(request.headers.get("X-Auth-Token"))
        if caller is None:
            raise Refused(401, "The request you have made requires authentication.")
        subject = tokens.find(request.headers.get("X-Subject-Token"))
        if subject is None or (subject.user.pk != caller.user.pk and not caller.user.is_superuser):
            raise Refused(404, "Could not find token.")
        return subject

    def get(self, request):
        subject = self._subject(request)
        methods = ["token"] if subject.credential is None else ["application_credential"]
        response = JsonResponse(token_body(request, subject, methods))
        response["X-Subject-Token"] = subject.key
        return response

    def head(self, request):
        self._subject(request)
        return HttpResponse(status=200)

    def delete(self, request):
        """Revoke: that token stops working everywhere; the user's other tokens (other
        log-ins, their API tokens) go on."""
        self._subject(request).revoke()
        return HttpResponse(status=204)


def _own(request, ident: str):
    user = request.keystone_token.user
    if ident != str(user.pk):
        raise Refused(404, f"Could not find {ident}.")
    return user


class CatalogView(KeystoneView):
    def get(self, request):
        return JsonResponse({"catalog": catalog(request)})


class ProjectsView(KeystoneView):
    """The caller's projects (``/auth/projects``, ``/projects``, ``/users/{id}/projects``)."""

    def get(self, request, user_id: str | None = None):
        user = request.keystone_token.user if user_id is None else _own(request, user_id)
        return JsonResponse(
            {
                "projects": [project_view(request, user)],
                "links": {"self": request.build_absolute_uri(), "next": None, "previous": None},
            }
        )


class ProjectView(KeystoneView):
    def get(self, request, project_id: str):
        return JsonResponse({"project": project_view(request, _own(request, project_id))})


def user_detail(request, user) -> dict:
    """A user as Keystone shows one (``GET /users/{id}`` and each item of ``GET /users``)."""
    return {
        **user_view(user),
        "domain_id": DOMAIN["id"],
        "default_project_id": str(user.pk),
        "enabled": user.is_active,
        "email": user.email,
        "password_expires_at": None,
        "options": {},
        "links": {"self": f"{base_url(request)}/identity/v3/users/{user.pk}"},
    }


def _is_false(value: str) -> bool:
    """Keystone's reading of a boolean filter: these words are false, anything else true."""
    return value.strip().lower() in {"0", "f", "false", "n", "no", "off"}


class UsersView(KeystoneView):
    """``GET /users``, filtered by ``name``, ``domain_id`` and ``enabled`` as Keystone's: the
    ``openstack`` CLI finds a user given by name here (``user show alice``). Keystone's policy
    lets a user see themself and an admin anyone, so a user's list holds at most themself."""

    def get(self, request):
        caller = request.keystone_token.user
        users = get_user_model().objects.order_by("pk")
        if not is_admin(caller):
            users = users.filter(pk=caller.pk)
        if "name" in request.GET:
            users = users.filter(username=request.GET["name"])
        if request.GET.get("domain_id", DOMAIN["id"]) != DOMAIN["id"]:
            users = users.none()
        if "enabled" in request.GET:
            users = users.filter(is_active=not _is_false(request.GET["enabled"]))
        return JsonResponse(
            {
                "users": [user_detail(request, user) for user in users],
                "links": {"self": request.build_absolute_uri(), "next": None, "previous": None},
            }
        )


class UserView(KeystoneView):
    """``GET /users/{id}``: the caller themself, or, for an admin, anyone (else a 404)."""

    def get(self, request, user_id: str):
        caller = request.keystone_token.user
        user = None
        if user_id == str(caller.pk):
            user = caller
        elif user_id.isdigit() and len(user_id) < 19 and is_admin(caller):
            user = get_user_model().objects.filter(pk=int(user_id)).first()
        if user is None:
            raise Refused(404, f"Could not find user: {user_id}.")
        return JsonResponse({"user": user_detail(request, user)})


class NotFoundView(KeystoneView):
    """Anything else under /identity: Keystone's 404, never a page."""

    needs_token = False

    def dispatch(self, request, *args, **kwargs):
        return Refused(404, "The resource could not be found.").response()
