"""The web tier while its PostgreSQL restarts or is down, as `make serve` runs it (uvicorn
workers with a pool of connections each): never a 500. While the database cannot be reached
every answer is a 503 with Retry-After (JSON under /api/, a page elsewhere); once it is back
the API answers again within 5 s, and a restart costs no request an error at all.

The server restarted here is one of the test's own (``lab.soak.services.Postgres``), not the
machine's, which the rest of the suite uses.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests

from lab.childprocess import child_env
from lab.soak.services import Postgres
from tests.conftest import wait_until
from tests.project.fixtures import AsgiServer
from tests.reliability.crowd import POSTGRES_ONLY

pytestmark = [pytest.mark.slow, pytest.mark.postgres, POSTGRES_ONLY]

REPO = Path(__file__).resolve().parents[2]
BACK_WITHIN_S = 5.0
MAKE_USER = """
from django.contrib.auth import get_user_model
from django.test import Client
from project.access.tokens import issue
user = get_user_model().objects.create_superuser("ops", password=None)
browser = Client()
browser.force_login(user)
print(issue(user)[1], browser.cookies["sessionid"].value)
"""


@pytest.fixture
def own_postgres():
    """A PostgreSQL server of the test's own with a migrated database: (server, its URL)."""
    base = Path(tempfile.mkdtemp(prefix="corral-pg-", dir="/tmp"))
    base.chmod(0o755)
    server = Postgres(base / "pg").start()
    try:
        server.create_database("corral")
        yield server, server.url("corral")
    finally:
        server.stop()


def _manage(url: str, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=REPO,
        env=child_env(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="project.test_settings", DEBUG="0"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_web_tier_answers_503_while_postgresql_is_down_and_no_500_across_a_restart(
    own_postgres, tmp_path
):
    server, url = own_postgres
    _manage(url, "migrate", "--noinput", "-v", "0")
    token, session = _manage(url, "shell", "-c", MAKE_USER).splitlines()[-1].split()
    web = AsgiServer(tmp_path / "web.log", workers=1, DATABASE_URL=url, CORRAL_DB_POOL_SIZE="4")
    web.start()
    api = requests.Session()
    api.headers["Authorization"] = f"Token {token}"
    try:
        # Warm: the pool holds open connections, which the restart will end.
        assert {api.get(f"{web.url}/api/me/", timeout=10).status_code for _ in range(8)} == {200}

        server.restart()
        after_restart = [api.get(f"{web.url}/api/me/", timeout=10) for _ in range(20)]
        assert [r.status_code for r in after_restart] == [200] * 20, web.log()[-3000:]

        server.stop()
        down = {path: api.get(f"{web.url}{path}", timeout=30) for path in ("/api/me/", "/api/vms/")}
        assert {path: r.status_code for path, r in down.items()} == {
            "/api/me/": 503,
            "/api/vms/": 503,
        }, web.log()[-3000:]
        for answer in down.values():
            assert answer.headers["Retry-After"] == "2"
            assert answer.json() == {
                "detail": "The database is unavailable for now; try again in a few seconds."
            }
        page = requests.get(f"{web.url}/", cookies={"sessionid": session}, timeout=30)
        assert (page.status_code, page.headers.get("Retry-After")) == (503, "2")
        assert "Unavailable for now" in page.text

        server.start()
        back = time.monotonic()
        wait_until(
            lambda: api.get(f"{web.url}/api/me/", timeout=10).status_code == 200,
            timeout=30,
            interval=0.1,
            message=lambda: web.log()[-3000:],
        )
        assert time.monotonic() - back <= BACK_WITHIN_S
        assert "Internal Server Error" not in web.log()
    finally:
        web.stop()
