"""The event feed's tests ask ``project.asgi:application`` as scripts do (an API token), through
the live path a deployment takes; tests of the WSGI fallback make their own client."""

import pytest


@pytest.fixture
def client_for(asgi_app):
    """client_for(user) -> a client of the ASGI application with ``user``'s API token (None:
    anonymous)."""
    return asgi_app.client
