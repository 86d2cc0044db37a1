"""Keystone's use cases, with no HTTP: tokens and application credentials, and who holds
Keystone's admin role.

Tokens: a log-in by password or by application credential gives a token of its own
(project/access/tokens.py keeps them: hashed, expiring, revocable), lasting
``CORRAL_KEYSTONE_TOKEN_MINUTES`` (Keystone's default: an hour), no longer than its application
credential, and going when the credential is deleted. Revoking one (``DELETE
/identity/v3/auth/tokens``, ``openstack token revoke``) ends that token alone.

Application credentials: made, listed and deleted by their owner; a secret checked at log-in
against its hash. A credential acts with its owner's grants, so it never reaches more than the
owner does, and only while the owner is active.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.hashers import check_password, make_password
from django.db import IntegrityError, transaction
from django.utils import timezone

from project.access import tokens
from project.access.permissions import holds_at_system
from project.error_codes import ProjectErrorCode
from project.errors import Refused
from project.models import APIToken, ApplicationCredential, TokenKind

MAX_PER_USER = 100
NAME_LENGTH = ApplicationCredential._meta.get_field("name").max_length
DESCRIPTION_LENGTH = ApplicationCredential._meta.get_field("description").max_length
SECRET_LENGTH = 4096


def is_admin(user) -> bool:
    """Whether ``user`` holds Keystone's admin role: a superuser or a system-wide admin."""
    return user.is_superuser or holds_at_system(user, "hosts.change_host")


@dataclass(frozen=True)
class IdentityToken:
    """A token a client holds (``key``) and what is kept of it: whose it is, until when, and
    the application credential it came from."""

    key: str
    row: APIToken

    @property
    def user(self):
        return self.row.user

    @property
    def credential(self) -> ApplicationCredential | None:
        return self.row.credential

    @property
    def expires_at(self):
        return self.row.expiry

    @property
    def issued_at(self):
        return self.row.created

    @property
    def audit_id(self) -> str:
        # Keystone's audit ids name a token in logs without being it: 22 characters.
        return self.row.digest[:22]

    def revoke(self) -> None:
        tokens.revoke(self.row)


def find_token(key: str | None) -> IdentityToken | None:
    """The valid token ``key`` names (any of a Keystone log-in's or an API token), of an active
    user, or None."""
    row = tokens.find(key)
    return IdentityToken(key.strip(), row) if row is not None else None


def token_for_password(user) -> IdentityToken:
    row, key = tokens.issue(user, TokenKind.KEYSTONE, name="Keystone password log-in")
    return IdentityToken(key, row)


def token_for_credential(credential: ApplicationCredential) -> IdentityToken:
    """A new token of ``credential``, lasting no longer than it."""
    row, key = tokens.issue(
        credential.owner,
        TokenKind.KEYSTONE,
        name=f"application credential {credential.name}",
        credential=credential,
        expires_at=credential.expires_at,
    )
    return IdentityToken(key, row)


def new_secret() -> str:
    """Keystone's kind of generated secret: 64 random bytes, URL-safe base64 without padding."""
    return secrets.token_urlsafe(64)


def create_credential(
    owner,
    name: str,
    *,
    secret: str | None = None,
    description: str | None = None,
    expires_at: datetime | None = None,
    unrestricted: bool = False,
) -> tuple[ApplicationCredential, str]:
    """A new credential of ``owner`` and its secret (the given one, else a generated one): the
    only time the secret is known; only its hash is kept. Names are unique per owner."""
    if not name or len(name) > NAME_LENGTH:
        raise Refused(
            ProjectErrorCode.INVALID_NAME, f"A name of 1 to {NAME_LENGTH} characters.", field="name"
        )
    if description is not None and len(description) > DESCRIPTION_LENGTH:
        raise Refused(
            ProjectErrorCode.INVALID_DESCRIPTION,
            f"A description of at most {DESCRIPTION_LENGTH} characters.",
            field="description",
        )
    if secret is not None and not 0 < len(secret) <= SECRET_LENGTH:
        raise Refused(
            ProjectErrorCode.INVALID_SECRET,
            f"A secret of 1 to {SECRET_LENGTH} characters.",
            field="secret",
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise Refused(
            ProjectErrorCode.EXPIRED,
            "The expiration time must be in the future.",
            field="expires_at",
        )
    if ApplicationCredential.objects.filter(owner=owner).count() >= MAX_PER_USER:
        raise Refused(
            ProjectErrorCode.TOO_MANY, f"A user has at most {MAX_PER_USER} application credentials."
        )
    secret = secret or new_secret()
    try:
        with transaction.atomic():
            credential = ApplicationCredential.objects.create(
                owner=owner,
                name=name,
                description=description,
                secret_hash=make_password(secret),
                expires_at=expires_at,
                unrestricted=unrestricted,
            )
    except IntegrityError:
        raise Refused(
            ProjectErrorCode.DUPLICATE_NAME,
            f"You already have an application credential named {name!r}.",
        ) from None
    return credential, secret


def credentials_of(owner):
    return ApplicationCredential.objects.filter(owner=owner).order_by("name")


def credential_by_id(ident: str) -> ApplicationCredential | None:
    if len(ident) > 32:
        return None
    return ApplicationCredential.objects.select_related("owner").filter(pk=ident).first()


def credential_by_name(owner, name: str) -> ApplicationCredential | None:
    return (
        ApplicationCredential.objects.select_related("owner").filter(owner=owner, name=name).first()
    )


def checked_credential(
    credential: ApplicationCredential | None, secret: str
) -> ApplicationCredential | None:
    """``credential`` if ``secret`` is its secret, it has not expired and its owner is active;
    else None (a hash is computed even for no credential, so the time does not tell)."""
    if credential is None:
        make_password(secret)
        return None
    if not check_password(secret, credential.secret_hash):
        return None
    if credential.expires_at is not None and credential.expires_at <= timezone.now():
        return None
    if not credential.owner.is_active:
        return None
    return credential


def delete_credential(credential: ApplicationCredential) -> None:
    """Delete ``credential``: the tokens it gave stop working at once."""
    credential.delete()
