"""JSON from outside is decoded in one place, under one depth limit (project/json_input.py):
a new ``json.loads`` on a request body, or a view that parses JSON with DRF's own parser,
fails here before it can answer a deep body with a 500."""

from __future__ import annotations

import ast
from pathlib import Path

from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.settings import api_settings

from project.api.parsers import JSONParser

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("project", "hosts", "scheduling", "pools", "leases", "openstack")
THE_ONE_DECODER = REPO / "project" / "json_input.py"


def decodes_json(tree: ast.AST) -> list[int]:
    """Lines calling ``json.load``/``json.loads`` or importing them from ``json``."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("load", "loads")
            and isinstance(node.value, ast.Name)
            and node.value.id == "json"
        ):
            lines.append(node.lineno)
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "json"
            and {alias.name for alias in node.names} & {"load", "loads", "JSONDecoder"}
        ):
            lines.append(node.lineno)
    return lines


def test_only_json_input_decodes_json():
    found = []
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            if path == THE_ONE_DECODER or "migrations" in path.parts:
                continue
            for line in decodes_json(ast.parse(path.read_text(), str(path))):
                found.append(f"{path.relative_to(REPO)}:{line}")
    assert not found, "decode JSON with project.json_input.loads():\n" + "\n".join(found)


def served_views(resolver=None):
    for pattern in (resolver or get_resolver()).url_patterns:
        if isinstance(pattern, URLResolver):
            yield from served_views(pattern)
        elif isinstance(pattern, URLPattern):
            view = getattr(pattern.callback, "cls", None)
            if view is not None:
                yield str(pattern.pattern), view


def test_every_api_view_parses_json_with_the_depth_limited_parser():
    views = list(served_views())
    assert len(views) > 50
    wrong = [
        f"{route}: {view.__name__} uses {parser.__module__}.{parser.__name__}"
        for route, view in views
        for parser in getattr(view, "parser_classes", ())
        if "json" in parser.media_type and not issubclass(parser, JSONParser)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_default_json_parser_is_the_depth_limited_one():
    json_parsers = [p for p in api_settings.DEFAULT_PARSER_CLASSES if "json" in p.media_type]
    assert json_parsers and all(issubclass(p, JSONParser) for p in json_parsers)
