"""Keystone v3 as OpenStack clients use it: the version document, log-in by password or
application credential (``POST /auth/tokens``), token validation and revocation, the
caller's own project and catalog (anyone's project, for an admin), and users (the caller
themself; anyone, for an admin)
and application credentials, made, listed, shown and deleted by their owner.

A Corral user is a Keystone user in the domain ``Default`` with one project of their own,
named after them; each log-in gives a token of its own, which expires after
``CORRAL_KEYSTONE_TOKEN_MINUTES`` and which revoking ends alone (services.py). A
password log-in's token opens Corral's own API too; an application credential's acts as its
owner on the OpenStack APIs only, until it expires or the credential is deleted. Every secret
check goes through the log-in lockout.
"""

from __future__ import annotations

import math
from datetime import UTC

from django.contrib.auth import get_user_model
from django.http import HttpResponse, JsonResponse
from django.utils.dateparse import parse_datetime

from openstack.identity import services
from openstack.identity.base import KeystoneError, KeystoneView, json_body, json_object, own_user
from openstack.identity.catalog import catalog
from openstack.identity.presenters import (
    DOMAIN,
    credential_view,
    project_view,
    roles_of,
    token_body,
    user_detail,
    version_view,
)
from openstack.identity.services import IdentityToken, is_admin
from project import errors, lockout
from project.error_codes import ProjectErrorCode
from project.models import ApplicationCredential

STATUS_OF = {ProjectErrorCode.DUPLICATE_NAME: 409, ProjectErrorCode.TOO_MANY: 409}


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


def _check_domain(domain: dict, where: str) -> None:
    if not domain:
        raise KeystoneError(400, f"{where} needs a domain (Default).")
    name, ident = domain.get("name"), domain.get("id")
    if (name is not None and name != DOMAIN["name"]) or (ident is not None and ident != "default"):
        raise KeystoneError(
            401, f"Unknown domain {name or ident!r}: Corral's users are in Default."
        )


def _password_user(request, identity: dict):
    """The user a password log-in names, checked through the lockout."""
    user_spec = json_object(json_object(identity.get("password"), "password").get("user"), "user")
    password = user_spec.get("password")
    if not isinstance(password, str) or not password:
        raise KeystoneError(400, "A password log-in needs user.password.")
    if user_spec.get("name") is not None:
        _check_domain(json_object(user_spec.get("domain"), "user.domain"), "user")
        username = str(user_spec["name"])
    elif user_spec.get("id") is not None:
        ident = str(user_spec["id"])
        known = ident.isdigit() and len(ident) < 19
        found = get_user_model().objects.filter(pk=int(ident)) if known else None
        username = found.values_list("username", flat=True).first() if found else None
        if username is None:
            raise KeystoneError(401, "The request you have made requires authentication.")
    else:
        raise KeystoneError(400, "A password log-in names the user by name (with a domain) or id.")
    try:
        user = lockout.authenticate(request, username, password)
    except lockout.LockedOut as locked:
        raise KeystoneError(429, str(locked), retry_after=math.ceil(locked.seconds)) from None
    if user is None:
        raise KeystoneError(401, "The request you have made requires authentication.")
    return user


def _check_scope(user, scope: dict) -> None:
    """Only the user's own project (what an unscoped log-in gets too)."""
    if not scope:
        return
    project = json_object(scope.get("project"), "scope.project")
    if not project:
        raise KeystoneError(401, "Corral offers project scopes only: the project named after you.")
    if project.get("id") is not None:
        if str(project["id"]) != str(user.pk):
            raise KeystoneError(401, f"You have no access to project {project['id']}.")
        return
    _check_domain(json_object(project.get("domain"), "scope.project.domain"), "scope.project")
    if project.get("name") != user.username:
        raise KeystoneError(
            401,
            f"You have no access to project {project.get('name')!r}; "
            f"your project is {user.username!r}.",
        )


def _credential(request, identity: dict):
    """The application credential a log-in names, its secret checked through the lockout."""
    spec = json_object(identity.get("application_credential"), "application_credential")
    secret = spec.get("secret")
    if not isinstance(secret, str) or not secret:
        raise KeystoneError(
            400, "An application credential log-in needs application_credential.secret."
        )
    if spec.get("id") is not None:
        credential = services.credential_by_id(str(spec["id"]))
        who = credential.owner.username if credential else f"application credential {spec['id']}"
    elif spec.get("name") is not None:
        owner = _credential_owner(json_object(spec.get("user"), "application_credential.user"))
        credential = services.credential_by_name(owner, str(spec["name"])) if owner else None
        who = owner.username if owner else f"application credential {spec['name']}"
    else:
        raise KeystoneError(
            400, "An application credential log-in names it by id, or by name with its user."
        )
    try:
        found = lockout.attempt(
            request, who, lambda: services.checked_credential(credential, secret)
        )
    except lockout.LockedOut as locked:
        raise KeystoneError(429, str(locked), retry_after=math.ceil(locked.seconds)) from None
    if found is None:
        raise KeystoneError(401, "The request you have made requires authentication.")
    return found


def _credential_owner(user_spec: dict):
    """The user an application credential named by name belongs to (by id, or name+domain)."""
    users = get_user_model().objects
    if user_spec.get("id") is not None:
        ident = str(user_spec["id"])
        return users.filter(pk=int(ident)).first() if ident.isdigit() and len(ident) < 19 else None
    if user_spec.get("name") is not None:
        _check_domain(json_object(user_spec.get("domain"), "user.domain"), "user")
        return users.filter(username=str(user_spec["name"])).first()
    raise KeystoneError(400, "An application credential named by name needs its user (id or name).")


class TokensView(KeystoneView):
    """``/identity/v3/auth/tokens``: log in (POST), validate (GET, HEAD), revoke (DELETE)."""

    needs_token = False

    def post(self, request):
        auth = json_object(json_body(request).get("auth"), "auth")
        identity = json_object(auth.get("identity"), "auth.identity")
        methods = identity.get("methods")
        if not isinstance(methods, list) or not methods:
            raise KeystoneError(400, "auth.identity.methods is required.")
        if methods == ["password"]:
            token = services.token_for_password(_password_user(request, identity))
        elif methods == ["token"]:
            given = json_object(identity.get("token"), "token").get("id")
            token = services.find_token(given if isinstance(given, str) else None)
            if token is None:
                raise KeystoneError(401, "The request you have made requires authentication.")
        elif methods == ["application_credential"]:
            token = services.token_for_credential(_credential(request, identity))
        else:
            raise KeystoneError(
                401,
                f"Unsupported authentication method {methods!r}: "
                "use password or application_credential.",
            )
        _check_scope(token.user, json_object(auth.get("scope"), "auth.scope"))
        response = JsonResponse(token_body(request, token, methods), status=201)
        response["X-Subject-Token"] = token.key
        return response

    def _subject(self, request) -> IdentityToken:
        caller = services.find_token(request.headers.get("X-Auth-Token"))
        if caller is None:
            raise KeystoneError(401, "The request you have made requires authentication.")
        subject = services.find_token(request.headers.get("X-Subject-Token"))
        if subject is None or (subject.user.pk != caller.user.pk and not caller.user.is_superuser):
            raise KeystoneError(404, "Could not find token.")
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


class CatalogView(KeystoneView):
    def get(self, request):
        return JsonResponse({"catalog": catalog(request)})


class ProjectsView(KeystoneView):
    """The caller's projects (``/auth/projects``, ``/projects``, ``/users/{id}/projects``)."""

    def get(self, request, user_id: str | None = None):
        user = request.keystone_token.user if user_id is None else own_user(request, user_id)
        return JsonResponse(
            {
                "projects": [project_view(request, user)],
                "links": {"self": request.build_absolute_uri(), "next": None, "previous": None},
            }
        )


# Keystone's policy refusals, whatever the project: a user learns nothing of others' projects,
# and the CLI then names a project by the id it was given (``openstack image add project``).
NOT_AUTHORIZED = "You are not authorized to perform the requested action: identity:{}."


class EveryProjectView(ProjectsView):
    """``GET /projects``: the caller's project; for an admin, every user's (as Keystone lists
    every project to an admin), filtered by ``name``: ``openstack quota set --cores 8 alice``
    finds alice's project here. A user who asks for another name is refused (403), as
    Keystone's policy refuses them any list of projects."""

    def get(self, request, user_id: str | None = None):
        caller = request.keystone_token.user
        if not is_admin(caller):
            if request.GET.get("name", caller.username) != caller.username:
                raise KeystoneError(403, NOT_AUTHORIZED.format("list_projects"))
            return super().get(request)
        users = get_user_model().objects.order_by("pk")
        if "name" in request.GET:
            users = users.filter(username=request.GET["name"])
        return JsonResponse(
            {
                "projects": [project_view(request, user) for user in users],
                "links": {"self": request.build_absolute_uri(), "next": None, "previous": None},
            }
        )


class ProjectView(KeystoneView):
    """``GET /projects/{id}``: the caller's own project, or, for an admin, anyone's. Any other
    id is Keystone's policy 403 to a user, whether such a project exists or not."""

    def get(self, request, project_id: str):
        caller = request.keystone_token.user
        if project_id == str(caller.pk):
            return JsonResponse({"project": project_view(request, caller)})
        if not is_admin(caller):
            raise KeystoneError(403, NOT_AUTHORIZED.format("get_project"))
        user = None
        if project_id.isdigit() and len(project_id) < 19:
            user = get_user_model().objects.filter(pk=int(project_id)).first()
        if user is None:
            raise KeystoneError(404, f"Could not find project: {project_id}.")
        return JsonResponse({"project": project_view(request, user)})


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
            raise KeystoneError(404, f"Could not find user: {user_id}.")
        return JsonResponse({"user": user_detail(request, user)})


class NotFoundView(KeystoneView):
    """Anything else under /identity: Keystone's 404, never a page."""

    needs_token = False

    def dispatch(self, request, *args, **kwargs):
        return KeystoneError(404, "The resource could not be found.").response()


def _not_restricted(request) -> None:
    credential = request.keystone_token.credential
    if credential is not None and not credential.unrestricted:
        raise KeystoneError(
            403,
            "Using method 'application_credential' is not allowed for managing additional "
            "application credentials.",
        )


def _optional_text(spec: dict, field: str) -> str | None:
    value = spec.get(field)
    if value is not None and not isinstance(value, str):
        raise KeystoneError(400, f"Invalid input for field '{field}': it must be a string or null.")
    return value


def _expires_at(spec: dict):
    text = _optional_text(spec, "expires_at")
    if text is None:
        return None
    try:
        moment = parse_datetime(text.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None:
        raise KeystoneError(400, f"Invalid input for field 'expires_at': {text!r} is not a time.")
    # Keystone reads a time without a zone as UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _check_roles(user, roles) -> None:
    """Roles asked for must be roles the owner holds (they change nothing: grants decide)."""
    if roles is None:
        return
    if not isinstance(roles, list):
        raise KeystoneError(400, "Invalid input for field 'roles': it must be a list.")
    held = {role["id"] for role in roles_of(user)}
    for role in roles:
        if not isinstance(role, dict):
            raise KeystoneError(400, "Invalid input for field 'roles': each is an object.")
        wanted = role.get("id", role.get("name"))
        if wanted not in held:
            raise KeystoneError(
                403, f"You do not hold role {wanted!r} on your project: you cannot delegate it."
            )


class CredentialsView(KeystoneView):
    """``/users/{user_id}/application_credentials``: list (``?name=``) and create."""

    def get(self, request, user_id: str):
        user = own_user(request, user_id)
        found = services.credentials_of(user).select_related("owner")
        if "name" in request.GET:
            found = found.filter(name=request.GET["name"])
        roles = roles_of(user)
        return JsonResponse(
            {
                "application_credentials": [
                    credential_view(request, credential, roles=roles) for credential in found
                ],
                "links": {"self": request.build_absolute_uri(), "next": None, "previous": None},
            }
        )

    def post(self, request, user_id: str):
        user = own_user(request, user_id)
        _not_restricted(request)
        spec = json_object(
            json_body(request).get("application_credential"), "application_credential"
        )
        name = spec.get("name")
        if not isinstance(name, str):
            raise KeystoneError(400, "Invalid input for field 'name': it is required, a string.")
        unrestricted = spec.get("unrestricted", False)
        if unrestricted is None:
            unrestricted = False
        if not isinstance(unrestricted, bool):
            raise KeystoneError(
                400, "Invalid input for field 'unrestricted': it must be a boolean."
            )
        if spec.get("access_rules"):
            raise KeystoneError(
                400, "Corral does not offer access rules: leave access_rules empty."
            )
        _check_roles(user, spec.get("roles"))
        try:
            credential, secret = services.create_credential(
                user,
                name,
                secret=_optional_text(spec, "secret"),
                description=_optional_text(spec, "description"),
                expires_at=_expires_at(spec),
                unrestricted=unrestricted,
            )
        except errors.Refused as refused:
            status = STATUS_OF.get(refused.code, 400)
            if status == 409:
                message = (
                    "Conflict occurred attempting to store application_credential - "
                    + refused.message
                )
            else:
                message = f"Invalid input for field '{refused.field}': {refused.message}"
            raise KeystoneError(
                status, message if refused.field or status == 409 else refused.message
            )
        body = {"application_credential": credential_view(request, credential, secret=secret)}
        return JsonResponse(body, status=201)


class CredentialView(KeystoneView):
    """``/users/{user_id}/application_credentials/{id}``: show and delete one's own."""

    def _credential(self, request, user_id: str, credential_id: str) -> ApplicationCredential:
        user = own_user(request, user_id)
        credential = services.credentials_of(user).filter(pk=credential_id).first()
        if credential is None or len(credential_id) > 32:
            raise KeystoneError(404, f"Could not find Application Credential: {credential_id}.")
        return credential

    def get(self, request, user_id: str, credential_id: str):
        credential = self._credential(request, user_id, credential_id)
        return JsonResponse({"application_credential": credential_view(request, credential)})

    def delete(self, request, user_id: str, credential_id: str):
        credential = self._credential(request, user_id, credential_id)
        _not_restricted(request)
        services.delete_credential(credential)
        return HttpResponse(status=204)
