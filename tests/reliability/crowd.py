"""A crowd of API clients for the concurrency scenarios: many users' requests sent at once
through a real web server, each with the user's own token, on a bounded pool of threads
(as many clients as a busy front end would hold open at once).

``scaled(n)`` sizes a scenario: the full numbers by default, or a fraction of them
(``CORRAL_RELIABILITY_SCALE=0.5``) on a machine too small to run them in reasonable time;
the ratios between a scenario's numbers stay the same.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import requests
from django.conf import settings

from tests.reliability.conftest import token_for

CLIENTS = 32
REQUEST_TIMEOUT_S = 120

POSTGRES_ONLY = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="many web and task processes writing at once need PostgreSQL (row locks, SKIP "
    "LOCKED); SQLite has a single writer",
)


def scale() -> float:
    """The scenarios' size as a fraction of their full numbers (1 unless told otherwise)."""
    value = float(os.environ.get("CORRAL_RELIABILITY_SCALE", "1"))
    if not 0 < value <= 1:
        raise ValueError("CORRAL_RELIABILITY_SCALE is a fraction in (0, 1]")
    return value


def scaled(full: int) -> int:
    """``full`` at the chosen scale (at least 1)."""
    return max(1, round(full * scale()))


@dataclass
class Answer:
    """One request and what the server said."""

    user: object
    path: str
    status: int
    body: object


def post_all(base_url: str, calls: list[tuple[object, str, dict | None]]) -> list[Answer]:
    """POST every (user, path, JSON body or None) at once from ``CLIENTS`` threads; the
    answers in the order of ``calls``."""
    headers = {}
    for user, _, _ in calls:
        if user.pk not in headers:
            headers[user.pk] = token_for(user)

    def post(call) -> Answer:
        user, path, body = call
        response = requests.post(
            f"{base_url}{path}", json=body, headers=headers[user.pk], timeout=REQUEST_TIMEOUT_S
        )
        try:
            answer = response.json()
        except ValueError:
            answer = response.text[:500]
        return Answer(user, path, response.status_code, answer)

    with ThreadPoolExecutor(max_workers=CLIENTS) as clients:
        return list(clients.map(post, calls))


def not_json(answers: list[Answer]) -> list[Answer]:
    """The answers whose body is not a JSON object (every API answer must be one)."""
    return [a for a in answers if not isinstance(a.body, dict | list)]
