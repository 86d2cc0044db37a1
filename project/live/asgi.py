"""The ASGI layer of live requests (event streams, long polls): a gate for their bursts, and
direct answers to the requests the process's event hub can answer alone.

A live request is cheap while it waits, but its (re)connection is a request like any other, and
they come in bursts: one event answers every long poll waiting for it and each polls again at
once; streams reconnect every CORRAL_EVENT_STREAM_SECONDS; a deploy sends every open page back
at once. Measured, a request through Django's middleware and request thread costs this process
about ten times what the answer itself does. Two things keep those bursts from crowding out
other requests:

- **Direct answers.** A live view may register a ``direct`` answer (``live_view(direct=...)``):
  for a request it fully understands (GET, a signed-in session or an API token as the view
  takes them, only the parameters it knows, a host Django would serve, JSON or an event stream)
  the view's own coroutine answers it from the hub, with the headers Django's stack sent on its
  last answer to the same kind of request. Anything else, and the first request of each kind
  in each process, goes through Django as usual, which also writes every refusal. What Django's
  stack would check first is checked by Django's own code, not a copy: the request is read as
  Django reads it (``ASGIRequest``), then passes the request checks of SecurityMiddleware (the
  redirect to HTTPS) and CommonMiddleware (the allowed hosts); the session is read as
  SessionMiddleware and AuthenticationMiddleware read it (``django.contrib.auth.get_user``), the
  token as the API reads it (``project.access.tokens.TokenAuthentication``). The user of a
  session or token is read once per CREDENTIAL_TTL_S per process: a signed-out session, a
  revoked token or a deactivated user stops being answered here within that, at once in the
  process it happened in; an expired token within that too.
  tests/project/test_live_middleware.py holds MIDDLEWARE as this layer was written for: a
  change there is reviewed here.
- **The gate.** The live requests that do go through Django run their synchronous part
  (middleware, authentication, the view's checks) at most LIVE_THREADS at a time per process;
  the rest wait their turn as coroutines, while other requests go by. The gate is held until
  the response starts, never while a request waits for events.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import io
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import import_module
from urllib.parse import parse_qsl

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost, PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest
from django.http.request import HttpHeaders
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import Resolver404, resolve
from rest_framework.authentication import get_authorization_header

from project.web.access_log import log_direct_answer

LIVE_THREADS = 2
CREDENTIAL_TTL_S = 10.0
PIONEER_WAIT_S = 5.0
TOKEN, SESSION = "token", "session"
# Headers of an answer that belong to that answer alone, never copied to another.
_OWN_HEADERS = {b"content-length", b"transfer-encoding", b"date", b"server", b"set-cookie"}


@dataclass
class DirectRequest:
    """What the ASGI layer read of a request a live view may answer directly, and how to
    answer it: ``answer`` (a body, once it is ready) or ``stream`` (chunks as they come)."""

    user: object
    query: dict[str, str]
    request: ASGIRequest
    headers: list[tuple[bytes, bytes]]
    receive: Callable[[], Awaitable[dict]]
    send: Callable[[dict], Awaitable[None]]
    answered: bool = field(default=False)

    def header(self, name: str) -> str | None:
        # META, not ``request.headers``: that copy of every header costs more than the rest.
        return self.request.META.get(HttpHeaders.to_wsgi_name(name))

    async def answer(self, body: bytes) -> None:
        self.answered = True
        length = [(b"content-length", str(len(body)).encode())]
        start = {"type": "http.response.start", "status": 200, "headers": self.headers + length}
        await self.send(start)
        await self.send({"type": "http.response.body", "body": body})

    async def until_answered(self, answer: Awaitable[bytes]) -> None:
        """Answer with ``answer`` once it is ready, unless the client goes away first."""
        waiting = asyncio.ensure_future(answer)
        if await self._unless_gone(waiting):
            await self.answer(waiting.result())

    async def stream(self, chunks: AsyncIterator[str]) -> None:
        """Send ``chunks`` as they come, until they end or the client goes away."""
        self.answered = True
        start = {"type": "http.response.start", "status": 200, "headers": self.headers}
        await self.send(start)

        async def write() -> None:
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    body = {"type": "http.response.body", "body": chunk.encode(), "more_body": True}
                    await self.send(body)

        writing = asyncio.ensure_future(write())
        if await self._unless_gone(writing):
            writing.result()
            await self.send({"type": "http.response.body", "body": b""})

    async def _unless_gone(self, task: asyncio.Future) -> bool:
        """Wait for ``task`` unless the client goes away first (then it is cancelled);
        whether it finished."""
        gone = asyncio.ensure_future(self.disconnected())
        try:
            done, _ = await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, gone):
                pending.cancel()
        return task in done

    async def disconnected(self) -> None:
        """Returns when the client has gone."""
        while (await self.receive())["type"] != "http.disconnect":
            pass


# A direct answer: False when it leaves the request to Django.
Direct = Callable[[DirectRequest], Awaitable[bool]]


def live_view(
    view=None, *, direct: Direct | None = None, credential: str = TOKEN, params: tuple = ()
):
    """Mark ``view`` as a live view (an event stream or a long poll): its requests pass the
    gate. ``direct`` answers, at the ASGI layer, the GETs signed in by ``credential`` (TOKEN:
    an API token; SESSION: the portal's session cookie) whose query parameters are among
    ``params``; it returns False to leave one to Django."""

    def mark(view):
        view.corral_live = True
        view.corral_direct = direct
        view.corral_direct_credential = credential
        view.corral_direct_params = frozenset(params)
        return view

    return mark(view) if view is not None else mark


def _token_user(key: str):
    from rest_framework.exceptions import AuthenticationFailed

    from project.access.tokens import TokenAuthentication

    try:
        user, _token = TokenAuthentication().authenticate_credentials(key)  # the API's own
        return user
    except AuthenticationFailed:
        return None
    finally:
        connection.close()


def _session_user(key: str):
    from django.contrib.auth import get_user

    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(key)
    try:
        user = get_user(request)  # Django's checks: the session, its user and its hash
        return user if user.is_authenticated and user.is_active else None
    finally:
        connection.close()


_READ_USER = {TOKEN: _token_user, SESSION: _session_user}


class Credentials:
    """Users of tokens and sessions, each read at most once per CREDENTIAL_TTL_S (for one
    event loop; a read in progress is shared)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], tuple[float, asyncio.Future]] = {}

    async def user(self, kind: str, key: str):
        now = time.monotonic()
        known = self._known.get((kind, key))
        if known is None or known[0] <= now or (known[1].done() and known[1].exception()):
            if len(self._known) > 10_000:
                self._known = {k: entry for k, entry in self._known.items() if entry[0] > now}
            read = sync_to_async(_READ_USER[kind], thread_sensitive=False)(key)
            future = asyncio.get_running_loop().create_task(read, context=contextvars.Context())
            known = self._known[(kind, key)] = (now + CREDENTIAL_TTL_S, future)
        return await asyncio.shield(known[1])

    def forget(self) -> None:
        self._known.clear()


_credentials: dict[asyncio.AbstractEventLoop, Credentials] = {}


def credentials() -> Credentials:
    loop = asyncio.get_running_loop()
    found = _credentials.get(loop)
    if found is None:
        for stale in [other for other in _credentials if other.is_closed()]:
            del _credentials[stale]
        found = _credentials[loop] = Credentials()
    return found


def forget_credentials(**_kwargs) -> None:
    """Tokens, sessions or users changed in this process: read them again (a signal receiver)."""
    for known in list(_credentials.values()):
        known.forget()


def _query(scope, allowed: frozenset[str]) -> dict[str, str] | None:
    try:
        pairs = parse_qsl(scope["query_string"].decode("ascii"), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        return None
    query = dict(pairs)
    if len(query) != len(pairs) or not set(query) <= allowed:
        return None
    return query


def _django_request(scope) -> ASGIRequest | None:
    """The request as Django reads it (its headers, cookies, host and scheme); its body,
    which a live request has none of, is never read. None: one Django refuses to read."""
    try:
        return ASGIRequest(scope, io.BytesIO())
    except UnicodeDecodeError:
        return None


def _credential(request: ASGIRequest, kind: str) -> str | None:
    """The ``kind`` credential the request carries, and nothing else that signs in: the API
    token as DRF's TokenAuthentication reads it, or the session cookie as SessionMiddleware
    does."""
    from project.access.tokens import TokenAuthentication

    if kind == TOKEN:
        if request.META.get("HTTP_ACCEPT") not in (None, "*/*", "application/json"):
            return None
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != TokenAuthentication.keyword.lower().encode():
            return None
        with contextlib.suppress(UnicodeDecodeError):
            return parts[1].decode()
        return None
    if "HTTP_AUTHORIZATION" in request.META:
        return None
    return request.COOKIES.get(settings.SESSION_COOKIE_NAME)


class _NoResponse:
    """What the middleware whose request checks the gate runs would call next: nothing."""

    def __call__(self, request):
        raise RuntimeError("only the middleware's request checks run here")


class LiveRequestGate:
    """ASGI middleware around Django's HTTP application (see the module docstring)."""

    def __init__(self, app):
        self.app = app
        # The request checks of Django's middleware a direct answer must pass, as Django's
        # handler runs them (built once, with the settings of the time, as the handler's are):
        # SecurityMiddleware's redirect to HTTPS (SECURE_SSL_REDIRECT, SECURE_PROXY_SSL_HEADER)
        # and CommonMiddleware's allowed hosts (ALLOWED_HOSTS, USE_X_FORWARDED_HOST), refused
        # user agents and redirect to www.
        self._checks = (SecurityMiddleware(_NoResponse()), CommonMiddleware(_NoResponse()))
        self._gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._views: dict[str, object] = {}
        # The headers Django's stack sent on each live view's last 200 to a request it may
        # answer directly; until there are some, one request finds them (a pioneer) while the
        # others of a burst wait for it (a process's first seconds after a restart).
        self._headers: dict[object, list[tuple[bytes, bytes]]] = {}
        self._pioneers: dict[object, asyncio.Event] = {}

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(LIVE_THREADS)
        return gate

    def _view(self, scope):
        """The live view ``scope`` is for (None: not a live request)."""
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path not in self._views:
            try:
                view = resolve(path).func
            except Resolver404:
                view = None
            if not getattr(view, "corral_live", False):
                view = None
            if len(self._views) < 10_000:
                self._views[path] = view
            return view
        return self._views[path]

    async def __call__(self, scope, receive, send):
        view = self._view(scope)
        if view is None:
            return await self.app(scope, receive, send)
        key = request = None
        if view.corral_direct is not None and scope["method"] == "GET":
            request = _django_request(scope)
            if request is not None and self._served_here(request):
                key = _credential(request, view.corral_direct_credential)
        pioneer = None
        if key is not None and view not in self._headers:
            pioneer = await self._pioneer_or_wait(view)
        answered = pioneer is None and key is not None
        if answered and await self._answer_directly(view, key, request, scope, receive, send):
            return None
        return await self._through_django(view, key, pioneer, scope, receive, send)

    def _served_here(self, request: ASGIRequest) -> bool:
        """Whether Django would serve the request as it is: no body (which Django would read
        and check), and through the request checks of its middleware without a refusal or
        a redirect."""
        if request.META.get("CONTENT_LENGTH", "0") not in ("", "0"):
            return False
        if "HTTP_TRANSFER_ENCODING" in request.META:
            return False
        try:
            return all(check.process_request(request) is None for check in self._checks)
        except (DisallowedHost, PermissionDenied):
            return False

    async def _pioneer_or_wait(self, view) -> asyncio.Event | None:
        """The event to set once this request found the view's headers, if it is the one to
        find them; None once another found them (or gave up)."""
        found = self._pioneers.get(view)
        if found is None:
            found = self._pioneers[view] = asyncio.Event()
            return found
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(found.wait(), PIONEER_WAIT_S)
        return None

    def _pioneer_done(self, view, pioneer: asyncio.Event | None) -> None:
        if pioneer is not None and self._pioneers.get(view) is pioneer:
            del self._pioneers[view]
            pioneer.set()

    async def _through_django(self, view, key: str | None, pioneer, scope, receive, send):
        gate = self._gate()
        await gate.acquire()
        held = True

        async def send_then_release(message):
            nonlocal held
            if held and message["type"] == "http.response.start":
                held = False
                gate.release()
                if key is not None and message["status"] == 200:
                    own = [(k, v) for k, v in message["headers"] if k.lower() not in _OWN_HEADERS]
                    self._headers[view] = own
                self._pioneer_done(view, pioneer)
            await send(message)

        try:
            return await self.app(scope, receive, send_then_release)
        finally:
            if held:
                gate.release()
            self._pioneer_done(view, pioneer)

    async def _answer_directly(self, view, key: str, request, scope, receive, send) -> bool:
        headers = self._headers.get(view)
        query = _query(scope, view.corral_direct_params)
        if headers is None or query is None:
            return False
        try:
            user = await credentials().user(view.corral_direct_credential, key)
        except (OperationalError, InterfaceError):
            return False  # the database is unreachable: Django answers (a 503)
        if user is None:
            return False  # Django answers: 401, or the log-in page
        started = time.perf_counter()

        async def send_and_log(message):
            if message["type"] == "http.response.start":
                types = [v for k, v in message.get("headers", ()) if k.lower() == b"content-type"]
                streaming = any(t.startswith(b"text/event-stream") for t in types)
                log_direct_answer(request, user, message["status"], started, streaming)
            await send(message)

        direct = DirectRequest(user, query, request, headers, receive, send_and_log)
        answered = await view.corral_direct(direct)
        if not answered and direct.answered:
            raise RuntimeError("a direct answer answered, then left the request to Django")
        return answered
