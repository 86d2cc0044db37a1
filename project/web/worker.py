"""The web tier's worker process (`make serve`, `make run`): gunicorn's uvicorn worker, which

- on stopping, first closes its listening socket and ends its open event streams and long polls
  (the event hub's readers), so that their pages reconnect at once to the processes that go on
  (a reload's new workers) instead of when the graceful timeout cuts them off;
- prepares, before it serves, what its first requests would otherwise prepare while a restart's
  reconnecting pages wait (``warm``), then is tuned for an event loop beside request threads
  (``tune``).

Imported by gunicorn's master, which never sets Django up: nothing of Django is imported here
until a worker stops.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import socket
import sys

from gunicorn.arbiter import Arbiter
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker as BaseWorker


def warm() -> None:
    """What the first requests of a process would otherwise prepare, done before it serves:
    the API's documented query parameters (drf-spectacular's schema, about a second of work,
    which every request with query parameters needs), the URL resolver and the database
    pool's first connections."""
    from django.db import connection
    from django.urls import get_resolver

    from project.api.query_parameters import documented_parameters

    get_resolver().url_patterns  # noqa: B018 - reading it imports and compiles the URLconf
    documented_parameters()
    pool = getattr(connection, "pool", None)
    if pool is not None:
        pool.open(wait=True, timeout=30)


def tune() -> None:
    """Short pauses for a process that answers from an event loop and request threads at once.

    Measured with a profiler under 1,000 open pages (docs/benchmarks.md): the tail of every
    request's time came from two pauses. The interpreter lock is handed over every 5 ms by
    default, so a request thread back from the database waits up to that for the loop's turn to
    end, at each query: handing it over every 1 ms keeps them short. And the collector's full
    passes walked the whole application (Django, the apps, the hub's events), 50-100 ms each,
    every few seconds: the objects loaded at start are frozen out of its reach, and the young
    generation is collected less often, so full passes are rare.
    """
    sys.setswitchinterval(0.001)
    gc.freeze()
    gc.set_threshold(20_000, 20, 10)


class DrainingServer(Server):
    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connection comes here (uvicorn closes them again, harmlessly)
        from project.live import event_hub

        event_hub.close_all()
        await super().shutdown(sockets)
        # Stopped as asked: the worker exits with 0, rather than raising the signal again once
        # done, as uvicorn would (the master would warn "Worker (pid:…) was sent SIGINT!" for
        # each worker at every Ctrl-C).
        self._captured_signals.clear()


class UvicornWorker(BaseWorker):
    # Django's ASGI application has no lifespan events: uvicorn need not ask (and say at each
    # start that the protocol "appears unsupported").
    CONFIG_KWARGS = {**BaseWorker.CONFIG_KWARGS, "lifespan": "off"}

    async def _serve(self) -> None:
        # As the base class's, with the server above.
        self.config.app = self.wsgi
        warm()
        tune()
        server = DrainingServer(config=self.config)
        self._quit_at_once(server)
        # The sockets themselves, not gunicorn's listeners around them: uvloop closes the
        # descriptor of what it is given, then that object, which gunicorn's listener cannot
        # (it would log "Error while closing socket [Errno 9]" at every stop).
        await server.serve(sockets=[listener.sock for listener in self.sockets])
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)

    @staticmethod
    def _quit_at_once(server: Server) -> None:
        """gunicorn's quick shutdown (its master's SIGINT or SIGQUIT: Ctrl-C) sends its workers
        SIGQUIT: the worker stops at once, open requests cut off. (The base class's handler
        marks the worker dead without stopping its server, which then waits out the graceful
        timeout to be killed, logged as "Perhaps out of memory?".) SIGTERM stays graceful."""

        def quit_now() -> None:
            server.should_exit = True
            server.force_exit = True

        asyncio.get_running_loop().add_signal_handler(signal.SIGQUIT, quit_now)
