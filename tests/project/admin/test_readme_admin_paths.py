"""The admin console's screens as README.md names them ("Access → Grants to users") are the
sections and screens the console's index shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

README = Path(__file__).resolve().parents[3] / "README.md"
# "(Section → Screen," or "(Section → Screen)": how the README points at an admin screen.
ADMIN_PATH = re.compile(r"\(([A-Z][a-z]+(?: [A-Za-z]+)*) → ([A-Z][a-z]+(?: [A-Za-z]+)*)[,)]")


def readme_admin_paths() -> list[tuple[str, str]]:
    return ADMIN_PATH.findall(" ".join(README.read_text().split()))


def test_the_readme_names_admin_screens():
    assert {
        ("Authentication and Authorization", "Users"),
        ("Access", "Grants to users"),
    } <= set(readme_admin_paths())


def test_every_admin_screen_the_readme_names_is_on_the_console_index(superuser_console):
    response = superuser_console.get(reverse("admin:index"))
    shown = {
        (str(app["name"]), str(screen["name"]))
        for app in response.context["app_list"]
        for screen in app["models"]
    }

    assert [path for path in readme_admin_paths() if path not in shown] == []
