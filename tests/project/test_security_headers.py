"""The production settings docs/production.md gives, run for real: Django's deployment check
passes with them, and gunicorn behind a simulated TLS proxy answers with HSTS, Secure cookies
and the Content-Security-Policy; a plain-HTTP test install (SECURE_COOKIES=0) works over HTTP.

The web servers are gunicorn with ``project.settings`` (not the test settings) on the test
database. The proxy is played by the test: it sends the site's Host and X-Forwarded-Proto, as
the nginx of docs/production.md does. gunicorn is told to trust no proxy address itself, so
only Django's SECURE_PROXY_SSL_HEADER can make a request secure.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
import requests

from tests.reliability.conftest import WebServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SITE = "corral.example.org"
# What every page answers with, production or not (settings.CONTENT_SECURITY_POLICY).
SITE_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
ONE_YEAR = 31536000
PASSWORD = "pw-Corral-1"  # what tests.conftest.make_user gives every user


def documented_environment() -> dict[str, str]:
    """The environment file of docs/production.md, its placeholders filled in (a strong
    SECRET_KEY made as the doc says)."""
    text = (ROOT / "docs" / "production.md").read_text()
    block = re.search(r"```sh\n# /etc/corral/env\n(.*?)```", text, re.S)
    assert block, "docs/production.md has no environment file"
    env = {}
    for line in block.group(1).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, value = line.split("=", 1)
        env[name] = value
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    return {name: re.sub(r"<[^>]*>", "placeholder", value) for name, value in env.items()}


def clean_environment(tmp_path: Path, **env: str) -> dict[str, str]:
    """Nothing of this test run's settings: what a fresh service would start with."""
    base = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return {**base, "CORRAL_VAR_DIR": str(tmp_path / "var"), **env}


def deploy_check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean_environment(tmp_path, DJANGO_SETTINGS_MODULE="project.settings", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_deployment_check_passes_with_the_documented_production_settings(tmp_path):
    result = deploy_check(tmp_path, **documented_environment())

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_deployment_check_passes_with_hsts_preload_asked_for(tmp_path):
    result = deploy_check(tmp_path, **documented_environment(), SECURE_HSTS_PRELOAD="1")

    assert result.returncode == 0, result.stderr


def test_the_deployment_check_fails_a_plain_http_install(tmp_path):
    result = deploy_check(tmp_path, **documented_environment(), SECURE_COOKIES="0")

    assert result.returncode == 1
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


# --- Responses of gunicorn -------------------------------------------------------------------


class ProxiedClient:
    """Requests to gunicorn as the site's reverse proxy sends them (https unless told), with
    the cookies the site set; never follows a redirect."""

    def __init__(self, server: WebServer, scheme: str = "https"):
        self.server = server
        self.scheme = scheme
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Host": SITE, **kwargs.pop("headers", {})}
        if self.scheme == "https":
            headers["X-Forwarded-Proto"] = "https"
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = requests.request(
            method,
            self.server.url + path,
            headers=headers,
            allow_redirects=False,
            timeout=30,
            **kwargs,
        )
        for name, morsel in set_cookies(response).items():
            self.cookies[name] = morsel.value
        return response

    def get(self, path: str, **kwargs) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def log_in(self, user, password: str) -> requests.Response:
        """Log in through the portal's form; the response of the form's post."""
        form = self.get("/login/")
        assert form.status_code == 200, form.text[:500]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        origin = f"{self.scheme}://{SITE}"
        response = self.request(
            "POST",
            "/login/",
            data={"username": user.username, "password": password, "csrfmiddlewaretoken": token},
            headers={"Origin": origin, "Referer": f"{origin}/login/"},
        )
        assert response.status_code == 302, response.text[:500]
        return response


def set_cookies(response: requests.Response) -> dict:
    """The cookies a response sets, with their attributes (Secure, HttpOnly, ...)."""
    jar = SimpleCookie()
    for header in response.raw.headers.getlist("Set-Cookie"):
        jar.load(header)
    return dict(jar)


def policy_of(response: requests.Response) -> dict[str, str]:
    header = response.headers["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


def start_server(tmp_path: Path, name: str, **env: str) -> WebServer:
    documented = documented_environment()
    del documented["DATABASE_URL"]  # the test database instead
    del documented["REDIS_URL"]  # the pages queue no task; no Redis at the documented address
    return WebServer(
        tmp_path / f"{name}.log",
        environ=clean_environment(tmp_path),
        DJANGO_SETTINGS_MODULE="project.settings",
        # Trust no proxy address in gunicorn: the scheme comes from SECURE_PROXY_SSL_HEADER.
        FORWARDED_ALLOW_IPS="192.0.2.1",
        **documented,
        **env,
    ).start()


@pytest.fixture(scope="module")
def _servers(django_db_setup, tmp_path_factory):
    """Two gunicorns on the test database: the documented production settings, and a
    plain-HTTP test install (SECURE_COOKIES=0)."""
    tmp_path = tmp_path_factory.mktemp("web")
    started = []
    try:
        started.append(start_server(tmp_path, "production"))
        started.append(start_server(tmp_path, "plain-http", SECURE_COOKIES="0"))
        yield {"production": started[0], "plain-http": started[1]}
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def production(_servers, transactional_db):
    return _servers["production"]


@pytest.fixture
def plain_http(_servers, transactional_db):
    return _servers["plain-http"]


@pytest.fixture
def site_user(make_user, settings):
    """make(superuser=False) -> a user whose password the production settings can check (they
    do not know the test suite's fast hasher)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    return make_user


def test_a_plain_http_request_is_redirected_to_https(production):
    response = ProxiedClient(production, scheme="http").get("/vms/?page=2")

    assert response.status_code == 301
    assert response.headers["Location"] == f"https://{SITE}/vms/?page=2"


def test_https_responses_carry_hsts_and_the_browser_security_headers(production):
    response = ProxiedClient(production).get("/login/")

    assert response.status_code == 200
    assert response.headers["Strict-Transport-Security"] == f"max-age={ONE_YEAR}; includeSubDomains"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert policy_of(response) == SITE_POLICY


def test_session_and_csrf_cookies_are_secure_after_a_log_in(production, site_user):
    user = site_user()
    client = ProxiedClient(production)

    cookies = set_cookies(client.log_in(user, PASSWORD))

    assert cookies["sessionid"]["secure"] is True
    assert cookies["sessionid"]["httponly"] is True
    assert cookies["csrftoken"]["secure"] is True  # a new token at log-in
    portal = client.get("/vms/")
    assert portal.status_code == 200
    assert user.username in portal.text


def test_portal_admin_and_api_pages_carry_the_policy(production, site_user):
    client = ProxiedClient(production)
    client.log_in(site_user(superuser=True), PASSWORD)

    pages = {
        path: client.get(path, headers={"Accept": accept})
        for path, accept in [
            ("/", "text/html"),
            ("/vms/", "text/html"),
            ("/leases/", "text/html"),
            ("/admin/", "text/html"),
            ("/admin/hosts/host/", "text/html"),
            ("/api/clusters/", "application/json"),
            ("/api/me/", "application/json"),
        ]
    }

    assert {path: page.status_code for path, page in pages.items()} == dict.fromkeys(pages, 200)
    assert {path: policy_of(page) for path, page in pages.items()} == dict.fromkeys(
        pages, SITE_POLICY
    )


def test_the_api_docs_and_the_browsable_api_get_only_what_they_need_beyond_the_policy(
    production, site_user
):
    client = ProxiedClient(production)
    client.log_in(site_user(superuser=True), PASSWORD)

    docs = client.get("/api/docs/")
    browsable = client.get("/api/clusters/", headers={"Accept": "text/html"})

    assert docs.status_code == 200
    assert policy_of(docs) == {**SITE_POLICY, "img-src": "'self' data:"}
    assert browsable.status_code == 200
    assert "Cluster List" in browsable.text
    assert policy_of(browsable) == {**SITE_POLICY, "style-src": "'self' 'unsafe-inline'"}


def test_a_plain_http_install_answers_over_http_without_hsts_or_secure_cookies(
    plain_http, site_user
):
    client = ProxiedClient(plain_http, scheme="http")

    form = client.get("/login/")
    logged_in = client.log_in(site_user(), PASSWORD)

    assert form.status_code == 200
    assert "Strict-Transport-Security" not in form.headers
    assert policy_of(form) == SITE_POLICY
    cookies = {**set_cookies(form), **set_cookies(logged_in)}
    assert cookies["csrftoken"]["secure"] == ""
    assert cookies["sessionid"]["secure"] == ""
    assert client.get("/vms/").status_code == 200
