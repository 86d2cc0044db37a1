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
