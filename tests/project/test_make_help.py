"""`make help` shows the values `make serve` will use, not empty shell variables."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def make_help(**env) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT", "WEB_WORKERS")}
    result = subprocess.run(
        ["make", "-s", "help"], cwd=ROOT, env={**base, **env}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_help_shows_where_and_with_how_many_processes_serve_runs():
    assert "serve project.asgi on 127.0.0.1:8000 with 2 processes" in make_help()


def test_make_help_shows_the_values_taken_from_the_environment():
    shown = make_help(HOST="0.0.0.0", PORT="9000", WEB_WORKERS="4")

    assert "serve project.asgi on 0.0.0.0:9000 with 4 processes" in shown
