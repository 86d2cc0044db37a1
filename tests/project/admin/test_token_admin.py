"""The admin console's tokens screen: an admin sees every user's tokens (what each is, whose,
until when) and revokes any, but never a token itself; there is no screen of clear tokens."""

from __future__ import annotations

from django.test import Client
from rest_framework.test import APIClient

from project.access import tokens
from project.models import APIToken, TokenKind

SCREEN = "/admin/project/apitoken/"


def opens_api(key: str) -> int:
    return APIClient().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}").status_code


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_tokens_screen_lists_every_users_tokens_but_never_a_token(admin_user, make_user):
    tina = make_user("tina")
    made = [tokens.issue(tina, name="ci-farm"), tokens.issue(tina, TokenKind.KEYSTONE)]

    page = admin_client(admin_user).get(SCREEN)

    assert page.status_code == 200
    text = page.content.decode()
    assert "ci-farm" in text and "OpenStack log-in" in text
    for row, key in made:
        assert key not in text and row.digest not in text and row.token_key not in text
        detail = admin_client(admin_user).get(f"{SCREEN}{row.pk}/change/").content.decode()
        assert key not in detail and row.digest not in detail and row.token_key not in detail


def test_there_is_no_screen_of_clear_tokens_and_no_token_is_made_there(admin_user):
    client = admin_client(admin_user)

    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404
    assert client.get(f"{SCREEN}add/").status_code == 403


def test_an_admin_revokes_a_users_token(admin_user, make_user):
    tina = make_user("tina")
    row, key = tokens.issue(tina)

    response = admin_client(admin_user).post(
        f"{SCREEN}{row.pk}/delete/", {"post": "yes"}, follow=True
    )

    assert response.status_code == 200
    assert not APIToken.objects.filter(pk=row.pk).exists()
    assert opens_api(key) == 401


def test_a_staff_user_who_may_not_change_users_does_not_see_the_screen(make_user):
    staff = make_user("staffer", is_staff=True)
    tokens.issue(staff)

    assert admin_client(staff).get(SCREEN).status_code == 403
