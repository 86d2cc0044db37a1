"""Keystone tokens: a log-in by password or by application credential gives a token of its own
(project/tokens.py keeps them: hashed, expiring, revocable), lasting
``CORRAL_KEYSTONE_TOKEN_MINUTES`` (Keystone's default: an hour), no longer than its application
credential, and going when the credential is deleted. Revoking one (``DELETE
/identity/v3/auth/tokens``, ``openstack token revoke``) ends that token alone."""

from __future__ import annotations

from dataclasses import dataclass

from project import tokens
from project.models import APIToken, ApplicationCredential, TokenKind


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


def find(key: str | None) -> IdentityToken | None:
    """The valid token ``key`` names (any of a Keystone log-in's or an API token), of an active
    user, or None."""
    row = tokens.find(key)
    return IdentityToken(key.strip(), row) if row is not None else None


def for_password(user) -> IdentityToken:
    row, key = tokens.issue(user, TokenKind.KEYSTONE, name="Keystone password log-in")
    return IdentityToken(key, row)


def for_credential(credential: ApplicationCredential) -> IdentityToken:
    """A new token of ``credential``, lasting no longer than it."""
    row, key = tokens.issue(
        credential.owner,
        TokenKind.KEYSTONE,
        name=f"application credential {credential.name}",
        credential=credential,
        expires_at=credential.expires_at,
    )
    return IdentityToken(key, row)
