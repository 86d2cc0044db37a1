"""Websocket routes: each app registers its consumers here from its ``AppConfig.ready()``;
``project/asgi.py`` serves them."""

from __future__ import annotations

from django.urls import path

ROUTES: list = []


def register(route: str, consumer) -> None:
    """Serve ``consumer`` (an ASGI app, e.g. ``Consumer.as_asgi()``) at ``route``."""
    ROUTES.append(path(route, consumer))
