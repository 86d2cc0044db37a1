"""Tokens clients sign in with (``project.models.APIToken``): made, found, listed, revoked.

A token is 64 random hex characters, shown once when it is made; only its SHA-512 is kept
(django-rest-knox's model and hashing), so the database, a backup or the admin console never
holds one a client could use. Every token expires: an API token after
``CORRAL_API_TOKEN_DAYS``, a Keystone log-in's after ``CORRAL_KEYSTONE_TOKEN_MINUTES`` (no
later than its application credential). Revoking one deletes its row: the next request with it
is a 401 (the live views' direct answers, project/live/asgi.py, within CREDENTIAL_TTL_S in
other processes).

Finding the token of a request is one query (the row and its user): it runs on every request.
Knox's own authentication class is not used for that: it reads the user's other tokens too, to
delete the expired ones, on every request; here they go when the user gets a new token and on
the project's pruning loop.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from knox.crypto import hash_token
from knox.models import get_digest_token
from knox.settings import CONSTANTS
from rest_framework import authentication
from rest_framework.exceptions import AuthenticationFailed

from project.models import APIToken, ApplicationCredential, TokenKind

KEY_LENGTH = 64
NAME_LENGTH = APIToken._meta.get_field("name").max_length


def lifetime(kind: str) -> timedelta:
    if kind == TokenKind.KEYSTONE:
        return timedelta(minutes=settings.CORRAL_KEYSTONE_TOKEN_MINUTES)
    return timedelta(days=settings.CORRAL_API_TOKEN_DAYS)


def issue(
    user,
    kind: str = TokenKind.API,
    *,
    name: str = "",
    credential: ApplicationCredential | None = None,
    expires_at: datetime | None = None,
) -> tuple[APIToken, str]:
    """A new token of ``user`` and its key: the only time the key is known. It lasts its
    kind's lifetime, or until ``expires_at`` if that is sooner. The user's expired tokens go
    at the same time."""
    now = timezone.now()
    expiry = now + lifetime(kind)
    if expires_at is not None:
        expiry = min(expiry, expires_at)
    APIToken.objects.filter(user=user, expiry__lte=now).delete()
    digest, key = get_digest_token()
    token = APIToken(
        user=user,
        digest=digest,
        token_key=key[: CONSTANTS.TOKEN_KEY_LENGTH],
        created=now,
        expiry=expiry,
        kind=kind,
        name=name[:NAME_LENGTH],
        credential=credential,
    )
    token.save(force_insert=True)
    return token, key


def find(key: str | None, *, api: bool = False) -> APIToken | None:
    """The unexpired token ``key`` names, of an active user, with its user (one query); None
    otherwise. ``api``: only a token that opens Corral's API (not an application
    credential's, which opens the OpenStack APIs alone, as in Keystone)."""
    key = (key or "").strip()
    if not key or len(key) > KEY_LENGTH or not key.isalnum():
        return None
    found = APIToken.objects.select_related("user", "credential").filter(
        digest=hash_token(key), expiry__gt=timezone.now()
    )
    if api:
        found = found.filter(credential__isnull=True)
    token = found.order_by().first()
    return token if token is not None and token.user.is_active else None


def listed(user):
    """``user``'s tokens that still work, newest first."""
    return APIToken.objects.filter(user=user, expiry__gt=timezone.now()).select_related(
        "credential"
    )


def revoke(token: APIToken) -> None:
    token.delete()


def revoke_own(user, token_id: int) -> bool:
    """Revoke ``user``'s token ``token_id``; False when they have no such token."""
    deleted, _ = APIToken.objects.filter(user=user, pk=token_id).delete()
    return deleted > 0


def revoke_all(user) -> None:
    """Every token of ``user`` stops working (a deactivated user)."""
    APIToken.objects.filter(user=user).delete()


def end_password_logins(sender, instance, update_fields=None, **kwargs) -> None:
    """pre_save of the user model: a new password ends the Keystone log-ins made with the old
    one (Keystone revokes a user's tokens when their password changes; Django's own sessions
    end through their password hash). API tokens and application credentials' tokens stay:
    each is a credential of its own, listed and revoked on its own."""
    if instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    old = type(instance).objects.filter(pk=instance.pk).values_list("password", flat=True)
    if old and old[0] != instance.password:
        APIToken.objects.filter(
            user_id=instance.pk, kind=TokenKind.KEYSTONE, credential__isnull=True
        ).delete()


def prune() -> int:
    """Delete expired tokens (none of them works any more); how many."""
    deleted, _ = APIToken.objects.filter(expiry__lte=timezone.now()).delete()
    return deleted


class TokenAuthentication(authentication.TokenAuthentication):
    """``Authorization: Token <key>`` on Corral's API: an API token, or a Keystone password
    log-in's; an unknown, expired or revoked one is a 401 ``WWW-Authenticate: Token``."""

    def authenticate_credentials(self, key):
        token = find(key, api=True)
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        return token.user, token
