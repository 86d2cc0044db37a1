"""Settings come from the environment: checked in fresh interpreters, as a deployment would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, django
from django.conf import settings
django.setup()
from django.db import connection
db = settings.DATABASES["default"]
out = {
    "engine": db["ENGINE"], "name": str(db["NAME"]), "debug": settings.DEBUG,
    "allowed_hosts": settings.ALLOWED_HOSTS, "q": {k: v for k, v in settings.Q_CLUSTER.items()
    if k in ("orm", "redis")},
}
if connection.vendor == "sqlite":
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        out["journal_mode"] = cursor.fetchone()[0]
    out["transaction_mode"] = db["OPTIONS"].get("transaction_mode")
print(json.dumps(out))
"""


def run_settings(tmp_path, **env) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "SECRET_KEY", "DEBUG", "REDIS_URL", "ALLOWED_HOSTS"}
    }
    base.update(DJANGO_SETTINGS_MODULE="project.settings", CORRAL_VAR_DIR=str(tmp_path / "var"))
    base.update(env)
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_secret_key_and_debug_off_the_settings_refuse_to_load(tmp_path):
    result = run_settings(tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_debug_on_gives_development_defaults_and_sqlite_under_var(tmp_path):
    result = run_settings(tmp_path, DEBUG="1")
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings["engine"] == "django.db.backends.sqlite3"
    assert settings["name"] == str(tmp_path / "var" / "corral.sqlite3")
    assert "127.0.0.1" in settings["allowed_hosts"]


def test_sqlite_runs_in_wal_mode_with_immediate_transactions(tmp_path):
    result = run_settings(tmp_path, DEBUG="1")
    settings = json.loads(result.stdout)
    assert settings["journal_mode"] == "wal"
    assert settings["transaction_mode"] == "IMMEDIATE"


def test_production_settings_take_secret_and_hosts_from_the_environment(tmp_path):
    result = run_settings(
        tmp_path, SECRET_KEY="s3cret", ALLOWED_HOSTS="corral.example.org, api.example.org"
    )
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings["debug"] is False
    assert settings["allowed_hosts"] == ["corral.example.org", "api.example.org"]


def test_database_url_selects_postgresql(tmp_path):
    result = run_settings(
        tmp_path, DEBUG="1", DATABASE_URL="postgres://corral@db.example.org:5433/corral"
    )
    settings = (
        json.loads(result.stdout.strip().splitlines()[-1]) if result.returncode == 0 else None
    )
    # Connecting is not needed to read the settings; the probe only opens SQLite connections.
    assert settings is not None, result.stderr
    assert settings["engine"] == "django.db.backends.postgresql"
    assert settings["name"] == "corral"


@pytest.mark.parametrize(
    ("env", "broker"),
    [
        ({}, {"orm": "default"}),
        ({"REDIS_URL": "redis://127.0.0.1:6379/3"}, {"redis": "redis://127.0.0.1:6379/3"}),
    ],
)
def test_task_broker_is_the_database_unless_redis_url_is_set(tmp_path, env, broker):
    result = run_settings(tmp_path, DEBUG="1", **env)
    assert json.loads(result.stdout)["q"] == broker


SECURITY_PROBE = """
import json, django
from django.conf import settings
django.setup()
print(json.dumps({
    "session_cookie_secure": settings.SESSION_COOKIE_SECURE,
    "csrf_cookie_secure": settings.CSRF_COOKIE_SECURE,
    "ssl_redirect": settings.SECURE_SSL_REDIRECT,
    "hsts_seconds": settings.SECURE_HSTS_SECONDS,
    "hsts_include_subdomains": settings.SECURE_HSTS_INCLUDE_SUBDOMAINS,
    "hsts_preload": settings.SECURE_HSTS_PRELOAD,
    "proxy_ssl_header": settings.SECURE_PROXY_SSL_HEADER,
    "silenced": settings.SILENCED_SYSTEM_CHECKS,
    "nosniff": settings.SECURE_CONTENT_TYPE_NOSNIFF,
    "referrer_policy": settings.SECURE_REFERRER_POLICY,
    "frame_options": settings.X_FRAME_OPTIONS,
    "csp": settings.CONTENT_SECURITY_POLICY["DIRECTIVES"],
    "csp_middleware": "project.web.csp.ContentSecurityPolicyMiddleware" in settings.MIDDLEWARE,
}))
"""
PRODUCTION = {"SECRET_KEY": "s3cret", "ALLOWED_HOSTS": "corral.example.org"}
SITE_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}


def security_settings(tmp_path, **env) -> dict:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SECURE_", "DEBUG", "SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS"))
    }
    base.update(DJANGO_SETTINGS_MODULE="project.settings", CORRAL_VAR_DIR=str(tmp_path / "var"))
    result = subprocess.run(
        [sys.executable, "-c", SECURITY_PROBE],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_production_is_https_only_with_hsts_for_a_year_and_no_preload(tmp_path):
    settings = security_settings(tmp_path, **PRODUCTION)

    assert settings["session_cookie_secure"] is True
    assert settings["csrf_cookie_secure"] is True
    assert settings["ssl_redirect"] is True
    assert settings["hsts_seconds"] == 31536000
    assert settings["hsts_include_subdomains"] is True
    assert settings["hsts_preload"] is False
    assert "security.W021" in settings["silenced"]
    assert settings["proxy_ssl_header"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_hsts_and_the_redirect_take_their_values_from_the_environment(tmp_path):
    settings = security_settings(
        tmp_path,
        **PRODUCTION,
        SECURE_HSTS_SECONDS="3600",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="0",
        SECURE_SSL_REDIRECT="0",
    )

    assert settings["hsts_seconds"] == 3600
    assert settings["hsts_include_subdomains"] is False
    assert settings["ssl_redirect"] is False
    assert settings["session_cookie_secure"] is True


def test_preload_asked_for_is_sent_and_its_check_no_longer_silenced(tmp_path):
    settings = security_settings(tmp_path, **PRODUCTION, SECURE_HSTS_PRELOAD="1")

    assert settings["hsts_preload"] is True
    assert "security.W021" not in settings["silenced"]


def test_secure_cookies_off_turns_off_everything_that_needs_https(tmp_path):
    settings = security_settings(
        tmp_path, **PRODUCTION, SECURE_COOKIES="0", SECURE_HSTS_SECONDS="3600"
    )

    assert settings["session_cookie_secure"] is False
    assert settings["csrf_cookie_secure"] is False
    assert settings["ssl_redirect"] is False
    assert settings["hsts_seconds"] == 0


def test_development_has_no_https_settings_but_the_same_headers_and_policy(tmp_path):
    development = security_settings(tmp_path, DEBUG="1")
    production = security_settings(tmp_path, **PRODUCTION)

    assert development["hsts_seconds"] == 0
    assert development["ssl_redirect"] is False
    assert development["session_cookie_secure"] is False
    for settings in (development, production):
        assert settings["csp"] == SITE_POLICY
        assert settings["csp_middleware"] is True
        assert settings["nosniff"] is True
        assert settings["referrer_policy"] == "same-origin"
        assert settings["frame_options"] == "DENY"


@pytest.mark.parametrize(
    "env",
    [
        {"SECURE_HSTS_SECONDS": "600"},
        {"SECURE_HSTS_INCLUDE_SUBDOMAINS": "0"},
        {"SECURE_COOKIES": "0"},
    ],
)
def test_preload_without_what_the_preload_list_requires_refuses_to_start(tmp_path, env):
    result = run_settings(tmp_path, **PRODUCTION, SECURE_HSTS_PRELOAD="1", **env)

    assert result.returncode != 0
    assert "SECURE_HSTS_PRELOAD needs HTTPS" in result.stderr


def test_a_negative_hsts_duration_refuses_to_start(tmp_path):
    result = run_settings(tmp_path, **PRODUCTION, SECURE_HSTS_SECONDS="-1")

    assert result.returncode != 0
    assert "SECURE_HSTS_SECONDS must be 0 or more" in result.stderr
