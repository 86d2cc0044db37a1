"""Keystone tokens: a password log-in gives the user's Corral API token (valid until revoked);
an application credential log-in gives a token of that credential, which expires with it (or
after a day) and goes when it is deleted."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from rest_framework.authtoken.models import Token

from project.models import ApplicationCredential, ApplicationCredentialToken

# Clients log in again after this (an API token itself stays valid until it is revoked).
TOKEN_HOURS = 24


@dataclass(frozen=True)
class IdentityToken:
    """A token a client holds: whose it is, and the application credential it came from."""

    key: str
    user: object
    credential: ApplicationCredential | None = None
    expires_at: datetime | None = None

    def revoke(self) -> None:
        if self.credential is None:
            Token.objects.filter(key=self.key).delete()
        else:
            ApplicationCredentialToken.objects.filter(key_hash=_hash(self.key)).delete()


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def find(key: str | None) -> IdentityToken | None:
    """The valid token ``key`` names, of an active user, or None."""
    key = (key or "").strip()
    if not key or len(key) > 64 or not key.isalnum():
        return None
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is not None:
        return IdentityToken(token.key, token.user) if token.user.is_active else None
    issued = (
        ApplicationCredentialToken.objects.select_related("credential__owner")
        .filter(key_hash=_hash(key), expires_at__gt=timezone.now())
        .first()
    )
    if issued is None or not issued.credential.owner.is_active:
        return None
    return IdentityToken(key, issued.credential.owner, issued.credential, issued.expires_at)


def for_password(user) -> IdentityToken:
    token, _ = Token.objects.get_or_create(user=user)
    return IdentityToken(token.key, user)


def for_credential(credential: ApplicationCredential) -> IdentityToken:
    """A new token of ``credential``, lasting a day or until the credential expires."""
    now = timezone.now()
    expires_at = now + timedelta(hours=TOKEN_HOURS)
    if credential.expires_at is not None:
        expires_at = min(expires_at, credential.expires_at)
    ApplicationCredentialToken.objects.filter(expires_at__lte=now).delete()
    key = secrets.token_hex(24)
    ApplicationCredentialToken.objects.create(
        key_hash=_hash(key), credential=credential, expires_at=expires_at
    )
    return IdentityToken(key, credential.owner, credential, expires_at)
