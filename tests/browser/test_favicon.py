"""The site's icon: linked from the portal's and the admin console's pages, and at /favicon.ico
for the browsers and tools that ask there, in development and in the production web tier."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def assert_the_icon_loads(page, path: str) -> None:
    page.goto(path)
    linked = page.locator('link[rel="icon"]').get_attribute("href")
    for url in (linked, "/favicon.ico"):
        icon = page.request.get(url)
        assert (icon.status, icon.headers["content-type"]) == (200, "image/svg+xml"), url
        assert icon.body().startswith(b"<svg")


def test_the_portal_and_the_admin_console_have_the_sites_icon(page):
    assert_the_icon_loads(page, "/login/")
    assert_the_icon_loads(page, "/admin/login/")


def test_the_production_web_tier_serves_the_sites_icon(asgi_pages):
    _, open_page = asgi_pages()

    assert_the_icon_loads(open_page(), "/login/")
