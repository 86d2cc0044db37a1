"""The Content-Security-Policy is on every page, in development as in production, error pages
included; only Django's debug pages for a 404 or a 500 in development (inline styles) go
without it. The response headers of production itself: tests/project/test_security_headers.py."""

from __future__ import annotations

import pytest

SITE_POLICY = (
    "default-src 'self'; script-src 'self'; object-src 'none'; style-src 'self'; "
    "font-src 'self'; img-src 'self'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'; connect-src 'self'"
)


def directives(header: str) -> dict[str, str]:
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


@pytest.mark.parametrize("debug", [True, False], ids=["development", "production"])
@pytest.mark.parametrize(
    ("path", "status"), [("/login/", 200), ("/admin/login/", 200), ("/api/vms/", 401)]
)
def test_every_page_carries_the_policy(client, settings, db, debug, path, status):
    settings.DEBUG = debug

    response = client.get(path)

    assert response.status_code == status
    assert directives(response["Content-Security-Policy"]) == directives(SITE_POLICY)


def test_the_not_found_page_carries_the_policy(client, db):
    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert "There is nothing here" in response.content.decode()
    assert directives(response["Content-Security-Policy"]) == directives(SITE_POLICY)


def test_only_djangos_debug_page_for_a_404_goes_without_it_in_development(client, settings, db):
    settings.DEBUG = True

    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert "Content-Security-Policy" not in response
