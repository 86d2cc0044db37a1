"""Websocket routes: each app registers its consumers from ``AppConfig.ready()``.

``project.asgi`` serves them behind the allowed-hosts origin check and the session login, so a
consumer finds the user in ``scope["user"]``. Nothing in ``project`` names the consumers.
"""

from __future__ import annotations

from django.urls import URLPattern, path

_routes: list[URLPattern] = []


def register(route: str, consumer) -> None:
    """Serve websockets on ``route`` (a Django path pattern) with ``consumer`` (a Channels
    consumer class)."""
    _routes.append(path(route, consumer.as_asgi()))


def routes() -> list[URLPattern]:
    """Every registered route, in the order the apps registered them."""
    return list(_routes)
