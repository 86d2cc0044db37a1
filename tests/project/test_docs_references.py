"""The documents name code that exists: every repository path in docs/*.md and README.md is a
file or folder of the checkout, every test they name (``tests/...py::test_name`` or a bare
`` `test_name` ``) is defined, and docs/production.md's table of environment variables lists
exactly what project/settings.py reads. A rename or a removal that leaves a document behind
fails here."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
TOP = sorted(
    path.name
    for path in ROOT.iterdir()
    if path.is_dir() and not path.name.startswith(".") and path.name not in {"var", "static"}
)
# A path from the checkout's root, e.g. hosts/operations/migrate.py, tests/hosts/ or
# tests/hosts/images/test_real_disks.py::test_a_running_vm_migrates_with_its_disk_to_...
PATH = re.compile(
    r"(?<![\w/.$~-])((?:" + "|".join(map(re.escape, TOP)) + r")/[\w./-]*)(?:::(\w+))?"
)
# A test's name alone: test_ and at least two words (`test_corral` is a database).
BARE_TEST = re.compile(r"`(test_[a-z0-9]+_\w+)`")
# Spans that look like paths but are URLs under /api/ or the portal.
URLS = {"leases/check/"}
MIGRATION = re.compile(r"(\w+)/(\d{4})")


def references(document: Path) -> list[tuple[str, str | None]]:
    text = document.read_text()
    found = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if text[match.end(1) : match.end(1) + 1] in {"<", "{", "*"}:
            continue  # a pattern (hosts/templates/<app>/…, tests/project/test_docs*), not a path
        if path not in URLS:
            found.append((path, match.group(2)))
    return found


@cache
def defined_tests(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    )


@cache
def every_test() -> frozenset[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        if "node_modules" not in path.parts:
            names |= defined_tests(path)
    return frozenset(names)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_path_and_test_a_document_names_exists(document):
    missing = []
    for path, test in references(document):
        migration = MIGRATION.fullmatch(path)
        if migration:  # a migration by its app and number: hosts/0010
            app, number = migration.groups()
            if not list((ROOT / app / "migrations").glob(f"{number}_*.py")):
                missing.append(path)
        elif not (ROOT / path).exists():
            missing.append(path)
        elif test is not None and test not in defined_tests(ROOT / path):
            missing.append(f"{path}::{test}")
    assert not missing, f"{document.name} names what the checkout does not hold: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_test_a_document_names_by_itself_is_defined(document):
    named = set(BARE_TEST.findall(document.read_text()))
    assert not named - every_test(), f"{document.name} names tests no file defines"


def read_by_settings() -> set[str]:
    """The environment variables project/settings.py reads, by their literal names."""
    tree = ast.parse((ROOT / "project" / "settings.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        function = node.func
        reads_environ = (
            isinstance(function, ast.Attribute)
            and function.attr == "get"
            and isinstance(function.value, ast.Attribute)
            and function.value.attr == "environ"
        )
        if reads_environ or (isinstance(function, ast.Name) and function.id.startswith("env_")):
            names.add(first.value)
    return names


def documented_variables() -> set[str]:
    text = (ROOT / "docs" / "production.md").read_text()
    table = text[text.index("## Environment variables") :]
    names = set()
    for cell in re.findall(r"^\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \|", table, re.M):
        names |= set(re.findall(r"`([A-Z_]+)`", cell))
    return names


def test_the_production_guide_lists_every_variable_the_settings_read():
    assert read_by_settings(), "no environment variable found in project/settings.py"
    assert read_by_settings() - documented_variables() == set()


def test_every_variable_the_production_guide_lists_is_read():
    makefile = (ROOT / "Makefile").read_text()
    read_by_make = set(re.findall(r"^([A-Z_]+) \?=", makefile, re.M))
    assert documented_variables() - read_by_settings() - read_by_make == set()
