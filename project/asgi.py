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

from project.web.request_threads import PooledThreadsASGIHandler  # noqa: E402

django_application = PooledThreadsASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from project import websockets  # noqa: E402
from project.live.asgi import LiveRequestGate  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": LiveRequestGate(django_application),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websockets.routes()))
        ),
    }
)
