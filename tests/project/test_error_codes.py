"""The registered error codes: every code a refusal or a failed job carries is a member of its
app's enum, listed in docs/error-codes.md and in the API schema, and the same string as ever."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from hosts.driver import DriverError
from hosts.error_codes import JobErrorCode
from pools.error_codes import PoolErrorCode
from project.error_codes import refusal_codes

ROOT = Path(__file__).resolve().parents[2]
APPS = ("project", "hosts", "scheduling", "pools", "leases")
DOCS = ROOT / "docs" / "error-codes.md"
SECTION = re.compile(r"^### (\S+) \(`[\w.]+`\)$", re.M)
ROW = re.compile(r"^\| `([a-z0-9_]+)` \| (.+) \|$", re.M)


def documented() -> dict[str, dict[str, str]]:
    """docs/error-codes.md's tables: section (an app, or "jobs") -> {code: meaning}."""
    text = DOCS.read_text()
    heads = list(SECTION.finditer(text))
    tables = {}
    for head, following in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : following.start() if following else len(text)]
        tables[head.group(1)] = dict(ROW.findall(body))
    return tables


def expected() -> dict[str, dict[str, str]]:
    enums = {**refusal_codes(), "jobs": JobErrorCode}
    return {name: dict(enum.choices()) for name, enum in enums.items()}


def test_the_docs_list_every_code_of_every_app_with_its_meaning():
    tables, wanted = documented(), expected()

    rows = "\n\n".join(
        f"### {name}\n" + "\n".join(f"| `{code}` | {meaning} |" for code, meaning in codes.items())
        for name, codes in wanted.items()
    )
    assert tables == wanted, f"docs/error-codes.md should list, by section:\n\n{rows}"


def test_every_code_has_a_meaning_and_one_owner():
    owners: dict[str, list[str]] = {}
    for app, enum in refusal_codes().items():
        for member in enum:
            assert member.meaning.strip(), f"{app}: {member.value} has no meaning"
            owners.setdefault(member.value, []).append(app)

    assert {code: apps for code, apps in owners.items() if len(apps) > 1} == {}
    assert all(member.meaning.strip() for member in JobErrorCode)


def test_a_code_is_the_same_string_it_was():
    """Members are strings: stored in a job's error_code, compared, and sent as JSON as is."""
    assert PoolErrorCode.POOL_EXHAUSTED == "pool_exhausted"
    assert json.dumps({"code": JobErrorCode.WORKER_LOST}) == '{"code": "worker_lost"}'
    assert f"{JobErrorCode.NO_HOST}" == str(JobErrorCode.NO_HOST) == "no_host"


def _driver_errors(cls=DriverError):
    yield cls
    for sub in cls.__subclasses__():
        yield from _driver_errors(sub)


def test_every_code_of_the_host_driver_is_a_job_error_code():
    """A job fails with the driver's code as it is (``host_call``): the driver cannot import
    the enum (it imports nothing of Corral), so the enum lists its codes."""
    import hosts.driver.libvirt.volumes  # noqa: F401 (its errors are DriverError's subclasses too)

    codes = {error.code for error in _driver_errors()}

    assert codes - set(JobErrorCode) == set()


def _refusal_classes(tree: ast.Module) -> set[str]:
    """Classes in the module that derive from a ``…Refused`` class (their ``super().__init__``
    passes the code)."""
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(
            (base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")) == "Refused"
            for base in node.bases
        )
    }


def _literal_codes(source: str, where: str) -> list[str]:
    """``Refused("code", …)``, ``JobFailed("code", …)`` and a Refused subclass's
    ``super().__init__("code", …)`` in ``source``: each a code outside the enums."""
    tree = ast.parse(source, filename=where)
    found = []
    subclasses = _refusal_classes(tree)
    for cls in ast.walk(tree):
        calls = []
        if isinstance(cls, ast.ClassDef) and cls.name in subclasses:
            calls = [
                node
                for node in ast.walk(cls)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__init__"
                and isinstance(node.func.value, ast.Call)
                and getattr(node.func.value.func, "id", "") == "super"
            ]
        elif isinstance(cls, ast.Module):
            calls = [
                node
                for node in ast.walk(cls)
                if isinstance(node, ast.Call)
                and (
                    getattr(node.func, "id", None) in ("Refused", "JobFailed")
                    or getattr(node.func, "attr", None) in ("Refused", "JobFailed")
                )
            ]
        for call in calls:
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append(f"{where}:{call.lineno}: {first.value!r}")
    return found


def product_modules():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def test_no_refusal_or_job_failure_gives_its_code_as_a_literal_string():
    literal = [
        found
        for path in product_modules()
        for found in _literal_codes(path.read_text(), str(path.relative_to(ROOT)))
    ]

    assert literal == [], "use the app's error_codes enum member instead"


def test_the_check_finds_a_literal_code():
    """The check above is not blind: each way of passing a code as a string is caught."""
    source = (
        "class LateRefused(Refused):\n"
        "    def __init__(self, message):\n"
        "        super().__init__('late', message)\n"
        "def f():\n"
        "    raise errors.Refused('busy', 'Busy.')\n"
        "def g():\n"
        "    raise JobFailed('gone', 'Gone.')\n"
        "def h():\n"
        "    raise Refused(AppErrorCode.BUSY, 'Busy.')\n"
    )

    found = _literal_codes(source, "refusals.py")

    assert sorted(found) == [
        "refusals.py:3: 'late'",
        "refusals.py:5: 'busy'",
        "refusals.py:7: 'gone'",
    ]


@pytest.fixture(scope="module")
def schema():
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


@pytest.mark.django_db
def test_the_schema_lists_every_refusal_code(schema):
    listed = schema["components"]["schemas"]["RefusalCode"]
    codes = {member.value for enum in refusal_codes().values() for member in enum}

    assert set(listed["enum"]) == codes
    assert "`pool_exhausted` (pools): No VM of the pool is free now" in listed["description"]


@pytest.mark.django_db
def test_the_schema_lists_every_job_error_code(schema):
    error = schema["components"]["schemas"]["Job"]["properties"]["error"]
    job_error = schema["components"]["schemas"][error["allOf"][0]["$ref"].rsplit("/", 1)[-1]]
    code = schema["components"]["schemas"][job_error["properties"]["code"]["$ref"].split("/")[-1]]

    assert error["nullable"] is True
    assert code["enum"] == [member.value for member in JobErrorCode]
