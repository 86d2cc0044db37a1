"""OpenStack clients send their token in ``X-Auth-Token``: a Corral API token there, or a token
given for an application credential, authenticates the request as its user (DRF's token
authentication, read from another header)."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from openstack.identity import tokens
from openstack.identity.catalog import base_url


class KeystoneTokenAuthentication(TokenAuthentication):
    """``X-Auth-Token: <token>``. No session: CSRF never applies."""

    def authenticate(self, request):
        key = request.META.get("HTTP_X_AUTH_TOKEN", "").strip()
        if not key:
            return None
        if len(key) > 64 or not key.isalnum():
            raise AuthenticationFailed("The token is not valid.")
        found = tokens.find(key)
        if found is None:
            # Not an API token, nor a live application credential's: DRF's own answers.
            return self.authenticate_credentials(key)
        return found.user, found

    def authenticate_header(self, request) -> str:
        # What keystonemiddleware answers: where to get a token.
        return f'Keystone uri="{base_url(request)}/identity/v3"'
