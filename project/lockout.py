"""Log-in lockout: too many failed log-ins for one username lock that username out for a while.

Every password check of the portal (/login/), the admin console (/admin/login/) and the API's
token endpoint (/api/auth/token/) goes through ``authenticate()`` here. After
``CORRAL_LOGIN_MAX_FAILURES`` failures for a username within ``CORRAL_LOGIN_LOCKOUT_MINUTES``,
every attempt for it is refused, even with the right password, until fewer failures than that
remain in the window; a successful log-in clears the username's failures. Failures are rows in
the database, so every web process counts the same ones.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.contrib import auth
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, permissions, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken

from project.models import LoginFailure

USERNAME_LENGTH = LoginFailure._meta.get_field("username").max_length


class LockedOut(Exception):
    """Attempts for this username are refused for ``seconds`` more."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        minutes = max(1, math.ceil(seconds / 60))
        unit = "minute" if minutes == 1 else "minutes"
        super().__init__(
            f"Too many failed log-ins for this account; try again in {minutes} {unit}."
        )


def _key(username: str) -> str:
    return username.strip().lower()[:USERNAME_LENGTH]


def _window() -> timedelta:
    return timedelta(minutes=settings.CORRAL_LOGIN_LOCKOUT_MINUTES)


def locked_for(username: str) -> float:
    """Seconds until ``username`` may try again; 0 when it may now."""
    limit = settings.CORRAL_LOGIN_MAX_FAILURES
    if limit <= 0:
        return 0.0
    now = timezone.now()
    recent = (
        LoginFailure.objects.filter(username=_key(username), at__gt=now - _window())
        .order_by("-at")
        .values_list("at", flat=True)[limit - 1 : limit]
    )
    # Locked while ``limit`` failures remain in the window: until the oldest of them leaves it.
    oldest_counted = next(iter(recent), None)
    if oldest_counted is None:
        return 0.0
    return max(0.0, (oldest_counted + _window() - now).total_seconds())


def record_failure(username: str) -> None:
    now = timezone.now()
    LoginFailure.objects.filter(at__lte=now - _window()).delete()
    LoginFailure.objects.create(username=_key(username), at=now)


def clear(username: str) -> None:
    LoginFailure.objects.filter(username=_key(username)).delete()


def authenticate(request, username: str, password: str):
    """Django's ``authenticate()``, refused while the username is locked out.

    Returns the user or None, like Django's; raises LockedOut without checking the password
    while locked. A failure is recorded, a success clears the username's failures.
    """
    seconds = locked_for(username)
    if seconds > 0:
        raise LockedOut(seconds)
    user = auth.authenticate(request, username=username, password=password)
    if user is None:
        record_failure(username)
    else:
        clear(username)
    return user


class LockoutFormMixin:
    """An AuthenticationForm whose password check goes through the lockout."""

    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            try:
                self.user_cache = authenticate(self.request, username, password)
            except LockedOut as locked:
                raise ValidationError(str(locked), code="locked_out") from None
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data


class LoginForm(LockoutFormMixin, AuthenticationForm):
    """The portal's log-in form."""


class AdminLoginForm(LockoutFormMixin, AdminAuthenticationForm):
    """The admin console's log-in form (staff only)."""


class LockedOutError(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "locked_out"

    def __init__(self, locked: LockedOut) -> None:
        super().__init__(str(locked))
        # DRF's exception handler turns ``wait`` into a Retry-After header.
        self.wait = math.ceil(locked.seconds)


class TokenSerializer(AuthTokenSerializer):
    def validate(self, attrs):
        username, password = attrs.get("username"), attrs.get("password")
        if username and password:
            try:
                user = authenticate(self.context.get("request"), username, password)
            except LockedOut as locked:
                raise LockedOutError(locked) from None
            if user is None:
                raise exceptions.ValidationError(
                    "Unable to log in with provided credentials.", code="authorization"
                )
            attrs["user"] = user
            return attrs
        return super().validate(attrs)


class ObtainTokenView(ObtainAuthToken):
    """A token for a username and password (refused with 429 while the username is locked)."""

    serializer_class = TokenSerializer
    # Anyone may ask (DRF's view has no permission classes); said so, the schema says so too.
    permission_classes = [permissions.AllowAny]

    @extend_schema(
        request=AuthTokenSerializer,
        responses={
            200: AuthTokenSerializer,
            429: OpenApiResponse(description="Too many failed log-ins for this username."),
        },
    )
    def post(self, request, *args, **kwargs):
        return super().post(request, *args, **kwargs)
