"""Keystone's application credentials API, ``/identity/v3/users/{user_id}/application_credentials``:
a user makes, lists, shows and deletes their own (another user's are not found). A token given
for a restricted credential may not make or delete credentials, as in Keystone."""

from __future__ import annotations

from datetime import UTC

from django.http import HttpResponse, JsonResponse
from django.utils.dateparse import parse_datetime

from openstack.identity import application_credentials as credentials
from openstack.identity.catalog import base_url
from openstack.identity.views import KeystoneView, Refused, _json_body, _object, _own, roles_of
from project import errors
from project.error_codes import ProjectErrorCode
from project.models import ApplicationCredential

STATUS_OF = {ProjectErrorCode.DUPLICATE_NAME: 409, ProjectErrorCode.TOO_MANY: 409}


def credential_view(
    request, credential: ApplicationCredential, *, secret: str | None = None, roles=None
) -> dict:
    owner = credential.owner
    url = (
        f"{base_url(request)}/identity/v3/users/{owner.pk}/application_credentials/{credential.id}"
    )
    body = {
        "id": credential.id,
        "name": credential.name,
        "description": credential.description,
        "expires_at": (
            credential.expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
            if credential.expires_at
            else None
        ),
        "project_id": str(owner.pk),
        "user_id": str(owner.pk),
        # Corral's permissions are grants, not Keystone roles: the owner's roles, never more.
        "roles": roles if roles is not None else roles_of(owner),
        "unrestricted": credential.unrestricted,
        "access_rules": [],
        "links": {"self": url},
    }
    if secret is not None:
        body["secret"] = secret
    return body


def _not_restricted(request) -> None:
    credential = request.keystone_token.credential
    if credential is not None and not credential.unrestricted:
        raise Refused(
            403,
            "Using method 'application_credential' is not allowed for managing additional "
            "application credentials.",
        )


def _optional_text(spec: dict, field: str) -> str | None:
    value = spec.get(field)
    if value is not None and not isinstance(value, str):
        raise Refused(400, f"Invalid input for field '{field}': it must be a string or null.")
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
        raise Refused(400, f"Invalid input for field 'expires_at': {text!r} is not a time.")
    # Keystone reads a time without a zone as UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _check_roles(user, roles) -> None:
    """Roles asked for must be roles the owner holds (they change nothing: grants decide)."""
    if roles is None:
        return
    if not isinstance(roles, list):
        raise Refused(400, "Invalid input for field 'roles': it must be a list.")
    held = {role["id"] for role in roles_of(user)}
    for role in roles:
        if not isinstance(role, dict):
            raise Refused(400, "Invalid input for field 'roles': each is an object.")
        wanted = role.get("id", role.get("name"))
        if wanted not in held:
            raise Refused(
                403, f"You do not hold role {wanted!r} on your project: you cannot delegate it."
            )


class CredentialsView(KeystoneView):
    """``/users/{user_id}/application_credentials``: list (``?name=``) and create."""

    def get(self, request, user_id: str):
        user = _own(request, user_id)
        found = credentials.owned_by(user).select_related("owner")
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
        user = _own(request, user_id)
        _not_restricted(request)
        spec = _object(_json_body(request).get("application_credential"), "application_credential")
        name = spec.get("name")
        if not isinstance(name, str):
            raise Refused(400, "Invalid input for field 'name': it is required, a string.")
        unrestricted = spec.get("unrestricted", False)
        if unrestricted is None:
            unrestricted = False
        if not isinstance(unrestricted, bool):
            raise Refused(400, "Invalid input for field 'unrestricted': it must be a boolean.")
        if spec.get("access_rules"):
            raise Refused(400, "Corral does not offer access rules: leave access_rules empty.")
        _check_roles(user, spec.get("roles"))
        try:
            credential, secret = credentials.create(
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
            raise Refused(status, message if refused.field or status == 409 else refused.message)
        body = {"application_credential": credential_view(request, credential, secret=secret)}
        return JsonResponse(body, status=201)


class CredentialView(KeystoneView):
    """``/users/{user_id}/application_credentials/{id}``: show and delete one's own."""

    def _credential(self, request, user_id: str, credential_id: str) -> ApplicationCredential:
        user = _own(request, user_id)
        credential = credentials.owned_by(user).filter(pk=credential_id).first()
        if credential is None or len(credential_id) > 32:
            raise Refused(404, f"Could not find Application Credential: {credential_id}.")
        return credential

    def get(self, request, user_id: str, credential_id: str):
        credential = self._credential(request, user_id, credential_id)
        return JsonResponse({"application_credential": credential_view(request, credential)})

    def delete(self, request, user_id: str, credential_id: str):
        credential = self._credential(request, user_id, credential_id)
        _not_restricted(request)
        credentials.delete(credential)
        return HttpResponse(status=204)
