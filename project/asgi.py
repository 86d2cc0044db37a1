"""ASGI entry point (``make serve``: gunicorn with uvicorn workers, ``project.asgi:application``).

HTTP goes to Django; websockets go to the routes apps register in project/websockets.py, behind
the allowed-hosts origin check and the session login (Channels' AuthMiddlewareStack).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Django first: the routes below import consumers, which may use models.
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from project import websockets  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_application,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websockets.routes()))
        ),
    }
)
