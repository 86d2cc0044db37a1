"""Helpers for tests that use the portal through Django's test client."""

from __future__ import annotations

from django.test import Client


def signed_in(user) -> Client:
    """A test client logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def messages_of(response) -> list[str]:
    """The messages a portal page shows (Django's messages framework)."""
    return [str(message) for message in response.context["messages"]]
