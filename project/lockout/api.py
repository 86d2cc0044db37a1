"""The API token endpoint's log-in (/api/auth/token/) through the lockout: 429 while locked."""

from __future__ import annotations

import math

from rest_framework import exceptions, status
from rest_framework.authtoken.serializers import AuthTokenSerializer

from project.lockout import LockedOut, authenticate


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
