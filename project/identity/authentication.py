"""OpenStack clients send their token in ``X-Auth-Token``: a Corral API token there
authenticates the request (DRF's token authentication, read from another header)."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from project.identity.catalog import base_url


class KeystoneTokenAuthentication(TokenAuthentication):
    """``X-Auth-Token: <Corral API token>``. No session: CSRF never applies."""

    def authenticate(self, request):
        key = request.META.get("HTTP_X_AUTH_TOKEN", "").strip()
        if not key:
            return None
        if len(key) > 64 or not key.isalnum():
            raise AuthenticationFailed("The token is not valid.")
        return self.authenticate_credentials(key)

    def authenticate_header(self, request) -> str:
        # What keystonemiddleware answers: where to get a token.
        return f'Keystone uri="{base_url(request)}/identity/v3"'
