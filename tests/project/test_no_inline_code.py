"""Nothing in our templates needs the Content-Security-Policy loosened: no inline script, no
event-handler attribute, no htmx hx-on (evaluated code), no javascript: URL, no inline style.
Scripts and styles live in project/static/corral/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

SCRIPT_ELEMENT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.I | re.S)
TAG = re.compile(r"<[a-zA-Z][^<>]*>", re.S)
FORBIDDEN_IN_A_TAG = {
    "an event-handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "an hx-on attribute": re.compile(r"\s(?:data-)?hx-on\b", re.I),
    "a style attribute": re.compile(r"\sstyle\s*=", re.I),
    "a javascript: URL": re.compile(r"=\s*[\"']?\s*javascript:", re.I),
}
STYLE_ELEMENT = re.compile(r"<style\b", re.I)
# Template comments never reach the browser.
COMMENTS = re.compile(r"\{#.*?#\}|\{% comment %\}.*?\{% endcomment %\}", re.S)


def inline_code(html: str) -> list[str]:
    """What in ``html`` the policy would refuse, one line each."""
    html = COMMENTS.sub("", html)
    found = []
    for attributes, content in SCRIPT_ELEMENT.findall(html):
        if content.strip():
            found.append(f"an inline script: <script{attributes}>{content.strip()[:60]}")
        elif "src=" not in attributes:
            found.append(f"a script without src: <script{attributes}>")
    for tag in TAG.findall(html):
        for what, pattern in FORBIDDEN_IN_A_TAG.items():
            if pattern.search(tag):
                found.append(f"{what}: {tag[:100]}")
    if STYLE_ELEMENT.search(html):
        found.append("a <style> element")
    return found


def test_no_template_has_inline_script_handlers_or_styles():
    templates = sorted(TEMPLATES.rglob("*.html"))

    found = {str(path.relative_to(TEMPLATES)): inline_code(path.read_text()) for path in templates}

    assert len(templates) > 20
    assert {path: what for path, what in found.items() if what} == {}


@pytest.mark.parametrize(
    ("html", "what"),
    [
        ("<script>\n  refresh();\n</script>", "an inline script"),
        ('<script type="module"></script>', "a script without src"),
        ('<button type="button" onclick="go()">Go</button>', "an event-handler attribute"),
        ('<form\n  method="post" onsubmit="return check()">', "an event-handler attribute"),
        ('<div hx-get="/x" hx-on:htmx:after-swap="done()">', "an hx-on attribute"),
        ('<div hx-on::after-request="done()">', "an hx-on attribute"),
        ('<span style="width: 5%"></span>', "a style attribute"),
        ('<a href="javascript:history.back()">Back</a>', "a javascript: URL"),
        ("<style>p { color: red }</style>", "a <style> element"),
    ],
)
def test_the_scan_finds_each_kind_of_inline_code(html, what):
    found = inline_code(html)

    assert len(found) == 1, found
    assert found[0].startswith(what), found


def test_the_scan_passes_scripts_from_files_and_plain_markup():
    html = (
        "{% load static %}<script src=\"{% static 'corral/portal.js' %}\" defer></script>\n"
        '<p class="help">Take one on the Take a VM page.</p>'
        '<div hx-get="/vms/rows/" hx-trigger="corral:changed from:body"></div>'
        "{# no <style> here #}{% comment %}<script>x()</script>{% endcomment %}"
    )

    assert inline_code(html) == []
