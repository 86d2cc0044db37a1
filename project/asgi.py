"""ASGI entry point (``make serve``: gunicorn with uvicorn workers, ``project.asgi:application``).

HTTP goes to Django, whose requests run their synchronous parts on threads kept and reused
(project/web/request_threads.py), the live requests (event streams, long polls) through a gate that
queues their bursts (project.live.asgi.py); websockets go to the routes apps register in
project/websockets.py, behind the allowed-hosts origin check and the session login (Channels'
AuthMiddlewareStack).
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Django first: the routes below import consumers, which may use models.
django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from project import websockets  # noqa: E402
from project.live.asgi import LiveRequestGate  # noqa: E402
from project.web.request_threads import PooledThreadsASGIHandler  # noqa: E402


def http_application() -> LiveRequestGate:
    """Django's HTTP application behind the live requests' gate. Both read the settings of
    their middleware once, when they are made."""
    return LiveRequestGate(PooledThreadsASGIHandler())


application = ProtocolTypeRouter(
    {
        "http": http_application(),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websockets.routes()))
        ),
    }
)
