"""API tokens: shown once when made and only a hash kept, each expiring, several per user, each
listed and revoked by its user (an admin revokes anyone's in the admin console, never seeing a
token), found in one query on every request."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import requests
import time_machine
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient, APIRequestFactory

from project.access import tokens
from project.models import APIToken, TokenKind
from tests.conftest import stored_rows

PASSWORD = "pw-Corral-1"  # what tests.conftest.make_user gives every user
MINE = "/api/me/tokens/"


def log_in(username: str) -> dict:
    response = APIClient().post(
        "/api/auth/token/", {"username": username, "password": PASSWORD}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def me(token: str) -> int:
    return APIClient().get("/api/me/", HTTP_AUTHORIZATION=f"Token {token}").status_code


def with_token(token: str) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_only_a_hash_of_a_token_is_stored_anywhere(make_user):
    make_user("tina")

    token = log_in("tina")["token"]

    assert len(token) == 64 and me(token) == 200
    assert token not in repr(stored_rows())
    assert APIToken.objects.get().digest != token


def test_a_token_says_when_it_expires_and_then_stops_working(make_user, settings):
    settings.CORRAL_API_TOKEN_DAYS = 7
    make_user("tina")
    before = timezone.now()

    body = log_in("tina")

    expires = APIToken.objects.get().expiry
    assert before + timedelta(days=7) <= expires <= timezone.now() + timedelta(days=7)
    assert datetime.fromisoformat(body["expires_at"]) == expires
    with time_machine.travel(expires - timedelta(seconds=1)):
        assert me(body["token"]) == 200
    with time_machine.travel(expires + timedelta(seconds=1)):
        assert me(body["token"]) == 401


def test_a_user_lists_their_own_tokens_without_the_tokens(make_user):
    tina, other = make_user("tina"), make_user("otto")
    token = log_in("tina")["token"]
    tokens.issue(tina, TokenKind.KEYSTONE, name="Keystone password log-in")
    tokens.issue(other, name="not tina's")

    response = with_token(token).get(MINE)

    assert response.status_code == 200
    listed = response.json()["results"]
    assert [(t["kind"], t["name"]) for t in listed] == [
        ("keystone", "Keystone password log-in"),
        ("api", "API log-in"),
    ]
    assert token not in response.content.decode()
    assert all(
        set(t) == {"id", "kind", "name", "created_at", "expires_at", "application_credential"}
        for t in listed
    )


def test_listing_tokens_takes_a_bounded_number_of_queries(make_user, django_assert_max_num_queries):
    tina = make_user("tina")
    for n in range(20):
        tokens.issue(tina, name=f"ci-{n}")
    client = APIClient()
    client.force_authenticate(tina)

    with django_assert_max_num_queries(3):
        response = client.get(MINE)

    assert response.json()["count"] == 20


def test_a_user_makes_another_token_shown_in_that_answer_only(make_user):
    make_user("tina")
    token = log_in("tina")["token"]

    made = with_token(token).post(MINE, {"name": "ci-farm"}, format="json")

    assert made.status_code == 201
    new = made.json()
    assert new["name"] == "ci-farm" and new["kind"] == "api"
    assert me(new["token"]) == 200
    shown = with_token(token).get(f"{MINE}{new['id']}/").json()
    assert "token" not in shown and new["token"] not in repr(stored_rows())


def test_revoking_a_token_ends_it_at_once_and_leaves_the_others(make_user):
    make_user("tina")
    first, second = log_in("tina")["token"], log_in("tina")["token"]
    second_id = APIToken.objects.order_by("id").last().pk

    revoked = with_token(first).delete(f"{MINE}{second_id}/")

    assert revoked.status_code == 204
    assert me(second) == 401
    assert me(first) == 200


def test_another_users_token_does_not_exist_for_the_caller(make_user):
    make_user("tina")
    otto = make_user("otto")
    token = log_in("tina")["token"]
    theirs, their_key = tokens.issue(otto)
    before = stored_rows()

    shown = with_token(token).get(f"{MINE}{theirs.pk}/")
    revoked = with_token(token).delete(f"{MINE}{theirs.pk}/")

    assert (shown.status_code, revoked.status_code) == (404, 404)
    assert stored_rows() == before
    assert me(their_key) == 200


def test_an_application_credentials_token_does_not_open_corrals_api(make_user):
    from project.models import ApplicationCredential

    tina = make_user("tina")
    credential = ApplicationCredential.objects.create(owner=tina, name="ci", secret_hash="x")
    _, key = tokens.issue(tina, TokenKind.KEYSTONE, credential=credential)

    assert me(key) == 401


def test_finding_a_requests_token_is_one_query(make_user, django_assert_max_num_queries):
    tina = make_user("tina")
    _, key = tokens.issue(tina)
    request = APIRequestFactory().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}")

    with django_assert_max_num_queries(1):
        user, token = tokens.TokenAuthentication().authenticate(request)
        assert user.username == "tina" and token.user.is_active

    assert token.kind == TokenKind.API


def test_expired_tokens_are_pruned_and_the_others_kept(make_user):
    tina = make_user("tina")
    keystone, _ = tokens.issue(tina, TokenKind.KEYSTONE)  # an hour
    api, key = tokens.issue(tina)  # days

    with time_machine.travel(keystone.expiry + timedelta(seconds=1)):
        assert tokens.prune() == 1

    assert list(APIToken.objects.values_list("pk", flat=True)) == [api.pk]
    assert me(key) == 200


@pytest.mark.django_db(transaction=True)
def test_clear_tokens_from_before_become_hashed_ones_that_still_work(make_user):
    """Corral kept DRF's tokens in clear (authtoken_token): the migration to hashed tokens keeps
    each working, for an API token's lifetime, and drops the clear ones."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    ours = ("project", "0012_api_tokens")
    before = [parent.key for parent in executor.loader.graph.node_map[ours].parents]
    latest = executor.loader.graph.leaf_nodes()
    tina = make_user("tina")
    clear = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"
    try:
        executor.migrate([key for key in before if key[0] == "project"])
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
                "created timestamp with time zone NOT NULL, user_id integer NOT NULL UNIQUE)"
                if connection.vendor == "postgresql"
                else "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
                "created datetime NOT NULL, user_id integer NOT NULL UNIQUE)"
            )
            cursor.execute(
                "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
                [clear, timezone.now(), tina.pk],
            )
        MigrationExecutor(connection).migrate(latest)
    finally:
        MigrationExecutor(connection).migrate(latest)

    assert "authtoken_token" not in connection.introspection.table_names()
    assert clear not in repr(stored_rows())
    assert me(clear) == 200
    assert APIToken.objects.get(user=tina).name == "API token made before tokens were hashed"


@pytest.mark.django_db(transaction=True)
def test_a_revoked_token_is_refused_at_once_by_the_live_views_answered_directly(
    asgi_server, make_user
):
    """A script's long polls are answered at the ASGI layer, which caches who a token is:
    revoking the token in that process forgets it there at once."""
    server = asgi_server()
    row, key = tokens.issue(make_user())
    headers = {"Authorization": f"Token {key}"}

    def poll() -> int:
        url = f"{server.url}/api/events/"
        return requests.get(url, params={"since": 0}, headers=headers, timeout=30).status_code

    assert [poll(), poll()] == [200, 200]  # the second answered directly
    revoked = requests.delete(f"{server.url}{MINE}{row.pk}/", headers=headers, timeout=30)

    assert revoked.status_code == 204
    assert poll() == 401
