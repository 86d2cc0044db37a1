"""OpenStack clients send their token in ``X-Auth-Token``: a Keystone log-in's token (for a
password or an application credential) or a Corral API token authenticates the request as its
user (project/tokens.py finds it, in one query)."""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed

from openstack.identity import tokens
from openstack.identity.catalog import base_url


class KeystoneTokenAuthentication(BaseAuthentication):
    """``X-Auth-Token: <token>``. No session: CSRF never applies."""

    def authenticate(self, request):
        key = request.META.get("HTTP_X_AUTH_TOKEN", "").strip()
        if not key:
            return None
        found = tokens.find(key)
        if found is None:
            # Unknown, expired, revoked, or of a deactivated user: DRF's words for it.
            raise AuthenticationFailed("Invalid token.")
        return found.user, found

    def authenticate_header(self, request) -> str:
        # What keystonemiddleware answers: where to get a token.
        return f'Keystone uri="{base_url(request)}/identity/v3"'
