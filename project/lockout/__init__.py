"""Log-in throttling: too many failed log-ins lock out a username for the address they came
from, and too many from one address lock out that address, for a while.

Every password check of the portal (/login/), the admin console (/admin/login/) and the API's
token endpoint (/api/auth/token/), and every Keystone log-in by password or application
credential, goes through ``authenticate()`` or ``attempt()`` here, counted by the client's
address (project/web/client_address.py; an IPv6 client by its /64, which one machine usually holds
whole). Within ``CORRAL_LOGIN_LOCKOUT_MINUTES``:

- ``CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS`` failures from an address, whatever the usernames,
  refuse every attempt from it: one address cannot try many names;
- ``CORRAL_LOGIN_MAX_FAILURES`` failures for a username from an address refuse that username
  from that address only: guessing the admin's password from elsewhere does not lock the admin
  out of their own address.

A refused attempt is answered 429 with ``Retry-After`` (the forms show the message), even with
the right password, and is not counted; the lock lifts when enough failures have left the
window. A successful log-in clears the failures of that username from that address. Failures
are rows in the database, so every web process counts the same ones.

The rules are here; the log-in forms that follow them are ``forms``, the log-in pages' 429 is
``views``, the API token endpoint's serializer is ``api``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from ipaddress import IPv6Network
from typing import TypeVar

from django.conf import settings
from django.contrib import auth
from django.db.models import QuerySet
from django.utils import timezone

from project.models import LoginFailure
from project.web.client_address import Address, client_address

T = TypeVar("T")

USERNAME_LENGTH = LoginFailure._meta.get_field("username").max_length
FOR_ACCOUNT = "for this account"
FROM_ADDRESS = "from your address"


class LockedOut(Exception):
    """Attempts are refused for ``seconds`` more; ``reason`` says what is locked, in words."""

    def __init__(self, seconds: float, reason: str = FOR_ACCOUNT) -> None:
        self.seconds = seconds
        minutes = max(1, math.ceil(seconds / 60))
        unit = "minute" if minutes == 1 else "minutes"
        super().__init__(f"Too many failed log-ins {reason}; try again in {minutes} {unit}.")


def username_key(username: str) -> str:
    return username.strip().lower()[:USERNAME_LENGTH]


def address_key(address: Address | None) -> str:
    """What failures from ``address`` are counted under: the address, an IPv6 one's /64."""
    if address is None:
        return ""
    if address.version == 6:
        return str(IPv6Network((address, 64), strict=False))
    return str(address)


def _window() -> timedelta:
    return timedelta(minutes=settings.CORRAL_LOGIN_LOCKOUT_MINUTES)


def _locked_for(failures: QuerySet, limit: int) -> float:
    """Seconds until fewer than ``limit`` of ``failures`` remain in the window (0: now)."""
    if limit <= 0:
        return 0.0
    now = timezone.now()
    recent = (
        failures.filter(at__gt=now - _window())
        .order_by("-at")
        .values_list("at", flat=True)[limit - 1 : limit]
    )
    # Locked while ``limit`` failures remain in the window: until the oldest of them leaves it.
    oldest_counted = next(iter(recent), None)
    if oldest_counted is None:
        return 0.0
    return max(0.0, (oldest_counted + _window() - now).total_seconds())


def check_not_locked(username: str, address: str) -> None:
    """Raise LockedOut if attempts from ``address`` (a key), or for ``username`` from it, are
    refused now."""
    from_address = LoginFailure.objects.filter(address=address)
    seconds = _locked_for(from_address, settings.CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS)
    if seconds > 0:
        raise LockedOut(seconds, FROM_ADDRESS)
    for_account = from_address.filter(username=username_key(username))
    seconds = _locked_for(for_account, settings.CORRAL_LOGIN_MAX_FAILURES)
    if seconds > 0:
        raise LockedOut(seconds, FOR_ACCOUNT)


def record_failure(username: str, address: str) -> None:
    now = timezone.now()
    LoginFailure.objects.filter(at__lte=now - _window()).delete()
    LoginFailure.objects.create(username=username_key(username), address=address, at=now)


def clear(username: str, address: str) -> None:
    LoginFailure.objects.filter(username=username_key(username), address=address).delete()


def attempt(request, username: str, check: Callable[[], T | None]) -> T | None:
    """``check()`` (a log-in for ``username`` by some secret), refused while the client's
    address or the username from it is locked out.

    Raises LockedOut without calling ``check`` while locked. None from ``check`` is a failure
    and is recorded; anything else is a success and clears the username's failures from the
    client's address (not the address's failures for other usernames).
    """
    address = address_key(client_address(request))
    check_not_locked(username, address)
    result = check()
    if result is None:
        record_failure(username, address)
    else:
        clear(username, address)
    return result


def authenticate(request, username: str, password: str):
    """Django's ``authenticate()`` through ``attempt()``: the user or None, like Django's."""
    return attempt(
        request,
        username,
        lambda: auth.authenticate(request, username=username, password=password),
    )
