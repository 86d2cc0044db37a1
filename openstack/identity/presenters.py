"""Keystone's rows as Keystone's JSON: the version document, users, the caller's own project,
roles, tokens and application credentials."""

from __future__ import annotations

from datetime import UTC

from openstack.identity.catalog import base_url, catalog
from openstack.identity.services import IdentityToken, is_admin
from project.models import ApplicationCredential

VERSION_ID = "v3.14"
DOMAIN = {"id": "default", "name": "Default"}


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
