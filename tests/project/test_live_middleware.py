"""The live path (project/live/asgi.py) answers some event streams and long polls without
Django's middleware, applying itself what that middleware would: a change to MIDDLEWARE is a
change to review there too. And the refusals and redirects of the middleware it stands in for
are the same on the live path as on any other view.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from project.access import tokens
from tests.project.fixtures import InProcessAsgiServer

# What the live path does for each, when it answers without Django.
MIRRORED = {
    "project.web.access_log.AccessLogMiddleware": "logs its answers (log_direct_answer)",
    "django.middleware.security.SecurityMiddleware": (
        "runs its request check (the redirect to HTTPS); copies its headers from Django's answer"
    ),
    "project.web.static_files.StaticFilesMiddleware": "nothing: live paths are no static files",
    "project.web.csp.ContentSecurityPolicyMiddleware": "copies its header from Django's answer",
    "django.contrib.sessions.middleware.SessionMiddleware": (
        "reads the session cookie and the session as it does"
    ),
    "django.middleware.common.CommonMiddleware": (
        "runs its request check (allowed hosts, refused user agents, the redirect to www.)"
    ),
    "django.middleware.csrf.CsrfViewMiddleware": "nothing: it answers GETs only",
    "django.contrib.auth.middleware.AuthenticationMiddleware": (
        "reads the session's user with django.contrib.auth.get_user"
    ),
    "django.contrib.messages.middleware.MessageMiddleware": "nothing: a live answer shows none",
    "django.middleware.clickjacking.XFrameOptionsMiddleware": (
        "copies its header from Django's answer"
    ),
    "project.api.middleware.ApiRequestMiddleware": (
        "takes no body and only the parameters the view documents"
    ),
    "project.web.database_down.DatabaseUnavailableMiddleware": (
        "leaves the request to Django when the database is unreachable"
    ),
}


def test_middleware_is_what_the_live_path_was_written_for():
    mirrored = "\n".join(f"  {name}: {what}" for name, what in MIRRORED.items())
    assert list(settings.MIDDLEWARE) == list(MIRRORED), (
        "MIDDLEWARE changed. The live path (project/live/asgi.py, LiveRequestGate) answers event "
        "streams and long polls without Django's middleware and applies itself what this "
        "middleware does; review it with this change, then update MIRRORED here. It was "
        f"written for:\n{mirrored}"
    )


# -- the same answers as any view ---------------------------------------------------------------

LONG_POLL, ME = "/api/events/?since=0", "/api/me/"
STREAM, PAGE = "/events/stream/", "/tokens/"
HTTPS = {"X-Forwarded-Proto": "https"}  # as the TLS proxy of a deployment says it


@pytest.fixture
def https_only(transactional_db, settings):
    """The web tier as a deployment runs it (HTTPS only behind its proxy), in this process."""
    # Loaded before the settings change: its own application is made once, for every test.
    from project.asgi import http_application

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
    settings.SECURE_SSL_REDIRECT = True
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.2
    server = InProcessAsgiServer(http_application()).start()
    yield server
    server.stop()


def _answer(client, path: str, **headers) -> tuple[int, str]:
    with client.get(path, headers=headers, stream=True) as response:
        return response.status_code, response.headers.get("Location", "")


def _token_client(server, user):
    """A script's client whose token the live path answers directly (its first poll went
    through Django)."""
    client = server.client(user)
    assert _answer(client, LONG_POLL, **HTTPS)[0] == 200
    assert _answer(client, LONG_POLL, **HTTPS)[0] == 200
    return client


def _session_client(server, user):
    """A browser whose streams the live path answers directly."""
    client = server.client(user, credential="session")
    assert _answer(client, STREAM, **HTTPS)[0] == 200
    assert _answer(client, STREAM, **HTTPS)[0] == 200
    return client


def test_a_host_not_allowed_is_a_400_on_the_live_path_as_on_any_view(https_only, make_user):
    user = make_user()
    polls, browser = _token_client(https_only, user), _session_client(https_only, user)
    bad = {**HTTPS, "Host": "corral.evil.example"}

    assert _answer(polls, LONG_POLL, **bad)[0] == _answer(polls, ME, **bad)[0] == 400
    assert _answer(browser, STREAM, **bad)[0] == _answer(browser, PAGE, **bad)[0] == 400


def test_plain_http_is_sent_to_https_on_the_live_path_as_on_any_view(https_only, make_user):
    user = make_user()
    polls, browser = _token_client(https_only, user), _session_client(https_only, user)
    https_url = https_only.url.replace("http://", "https://")

    for client, live, other in ((polls, LONG_POLL, ME), (browser, STREAM, PAGE)):
        assert _answer(client, live) == (301, f"{https_url}{live}")
        assert _answer(client, other) == (301, f"{https_url}{other}")


def test_an_anonymous_request_is_refused_on_the_live_path_as_on_any_view(https_only, make_user):
    user = make_user()
    _token_client(https_only, user), _session_client(https_only, user)
    anonymous = https_only.client()

    assert _answer(anonymous, LONG_POLL, **HTTPS)[0] == _answer(anonymous, ME, **HTTPS)[0] == 401
    stream, page = _answer(anonymous, STREAM, **HTTPS), _answer(anonymous, PAGE, **HTTPS)
    assert (stream[0], page[0]) == (302, 302)
    assert stream[1] == f"/login/?next={STREAM}"
    assert page[1] == f"/login/?next={PAGE}"


def test_an_expired_token_is_refused_on_the_live_path_as_on_any_view(https_only, make_user):
    user = make_user()
    _token_client(https_only, user)
    expired = tokens.issue(user, expires_at=timezone.now() - timedelta(minutes=1))[1]
    client = https_only.client()
    client.session.headers["Authorization"] = f"Token {expired}"

    assert _answer(client, LONG_POLL, **HTTPS)[0] == _answer(client, ME, **HTTPS)[0] == 401
