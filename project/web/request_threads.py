"""The threads a web process runs requests' synchronous parts on under ASGI: kept and reused.

Django's ASGI handler gives every request a thread of its own for its synchronous parts (the
middleware, the view, closing the response) and ends it with the request: two threads started
per request (its own and the one that joins it), each start holding the event loop until the new
thread runs, which under load means until the interpreter lock comes round to it. Here a request
borrows a thread from its process's pool whenever it runs synchronous code and gives it back when
it ends, or while it only waits (``live.park``): an open event stream or long poll holds none.

All of one request's synchronous calls run one at a time, on the thread it holds (Django's
"thread-sensitive" rule: its database connection belongs to that thread); a request that gave its
thread back (after closing its connection) borrows one again if it needs one.
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

# Idle threads a process keeps for the next requests; more are started when more run at once.
KEEP_IDLE = 64


class ThreadPool:
    """Single-thread executors, borrowed by requests one at a time (from the event loop)."""

    def __init__(self) -> None:
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()

    def borrow(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < KEEP_IDLE:
                self._idle.append(executor)
                return
        executor.shutdown(wait=False)


POOL = ThreadPool()


class RequestThread(Executor):
    """The executor of one request's thread-sensitive calls: a thread borrowed from ``POOL``
    on the first call, held until ``release``."""

    def __init__(self, pool: ThreadPool = POOL) -> None:
        self._pool = pool
        self._held: ThreadPoolExecutor | None = None
        self._running = 0
        self._lock = threading.Lock()  # the count is changed on the loop and on the thread

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if self._held is None:
            self._held = self._pool.borrow()
        with self._lock:
            self._running += 1
        future = self._held.submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future) -> None:
        with self._lock:
            self._running -= 1

    def release(self) -> None:
        """Give the thread back (the request runs nothing on it now); a later call borrows one
        again."""
        held, self._held = self._held, None
        if held is None:
            return
        with self._lock:
            busy = self._running > 0
        if busy:  # still running something (not expected): let it finish, and end it then
            held.shutdown(wait=False)
        else:
            self._pool.give_back(held)


class PooledThreadsASGIHandler(ASGIHandler):
    """Django's ASGI handler, each request's synchronous parts on a thread of ``POOL``."""

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        thread = RequestThread()
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, receive, send)
        finally:
            thread.release()
