"""The portal's API tokens page in a real browser: a user makes a token and sees it once, uses
it, and revokes it; their Keystone log-ins' tokens are listed beside it."""

from __future__ import annotations

import re

import pytest
import requests
from playwright.sync_api import expect

from project.access import tokens
from project.models import TokenKind
from tests.browser.conftest import log_in

pytestmark = pytest.mark.slow


def opens_api(url: str, token: str) -> int:
    response = requests.get(f"{url}/api/me/", headers={"Authorization": f"Token {token}"})
    return response.status_code


def test_a_user_makes_a_token_sees_it_once_uses_it_and_revokes_it(page, make_user, live_server):
    user = make_user()
    tokens.issue(user, TokenKind.KEYSTONE, name="Keystone password log-in")
    log_in(page, user)

    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("API tokens")
    expect(page.locator("#api-tokens")).to_contain_text("OpenStack log-in")
    page.get_by_label("Name").fill("ci-farm")
    page.get_by_role("button", name="Make a token").click()

    expect(page.locator("#new-token")).to_contain_text("shown this once only")
    token = page.locator("#new-token-value").inner_text()
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    assert opens_api(live_server.url, token) == 200
    row = page.locator("#api-tokens tr", has_text="ci-farm")
    expect(row).to_contain_text("API")

    page.goto("/tokens/")
    expect(page.locator("#new-token")).to_have_count(0)
    assert token not in page.content()

    page.locator("#api-tokens tr", has_text="ci-farm").get_by_role("button", name="Revoke").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Revoke").click()

    expect(page.locator("#messages")).to_contain_text("revoked")
    expect(page.locator("#api-tokens")).not_to_contain_text("ci-farm")
    assert opens_api(live_server.url, token) == 401
