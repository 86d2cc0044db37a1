"""Keystone's tokens are their own: each log-in gives one that expires (an hour, as Keystone's
default; a setting), and revoking one ends that token alone, never the user's API tokens or
other log-ins. The real ``openstack token issue`` and ``token revoke`` work on them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from rest_framework.test import APIClient, APIRequestFactory

from openstack.identity.base import KeystoneTokenAuthentication
from project.access import tokens
from project.models import APIToken, ApplicationCredential, TokenKind
from tests.openstack.conftest import as_json
from tests.openstack.test_identity import TOKENS, password_login

LEASES = "/reservation/v1/leases"


def keystone_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def opens_blazar(key: str) -> int:
    return APIClient().get(LEASES, HTTP_X_AUTH_TOKEN=key).status_code


def opens_api(key: str) -> int:
    return APIClient().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}").status_code


@pytest.mark.parametrize("minutes", [60, 15])
def test_a_log_ins_token_expires_after_the_keystone_token_lifetime(make_user, settings, minutes):
    settings.CORRAL_KEYSTONE_TOKEN_MINUTES = minutes
    make_user("ada-ks")

    response = password_login("ada-ks")

    body, key = response.json()["token"], response["X-Subject-Token"]
    issued, expires = keystone_time(body["issued_at"]), keystone_time(body["expires_at"])
    assert expires - issued == timedelta(minutes=minutes)
    with time_machine.travel(expires - timedelta(seconds=1)):
        assert opens_blazar(key) == 200
    with time_machine.travel(expires + timedelta(seconds=1)):
        assert opens_blazar(key) == 401
        assert opens_api(key) == 401


def test_revoking_a_keystone_token_leaves_the_users_api_token_and_other_log_ins(make_user):
    ben = make_user("ben-ks")
    _, api_token = tokens.issue(ben)
    first = password_login("ben-ks")["X-Subject-Token"]
    second = password_login("ben-ks")["X-Subject-Token"]

    revoked = APIClient().delete(TOKENS, HTTP_X_AUTH_TOKEN=first, HTTP_X_SUBJECT_TOKEN=first)

    assert revoked.status_code == 204
    assert opens_blazar(first) == 401
    assert opens_blazar(second) == 200
    assert opens_api(api_token) == 200
    assert opens_blazar(api_token) == 200


def test_a_new_password_ends_the_keystone_log_ins_made_with_the_old_one(make_user):
    cy = make_user("cy-ks")
    _, api_token = tokens.issue(cy)
    login = password_login("cy-ks")["X-Subject-Token"]
    assert opens_blazar(login) == 200

    changed = APIClient().patch(
        f"/api/users/{cy.pk}/",
        {"password": "a-new-long-passphrase"},
        format="json",
        HTTP_AUTHORIZATION=f"Token {api_token}",
    )

    assert changed.status_code == 200
    assert opens_blazar(login) == 401
    assert opens_api(api_token) == 200
    assert password_login("cy-ks", password="a-new-long-passphrase").status_code == 201


def test_a_keystone_token_is_listed_by_its_user_and_revoked_from_the_api(make_user):
    make_user("cleo-ks")
    key = password_login("cleo-ks")["X-Subject-Token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    [listed] = client.get("/api/me/tokens/").json()["results"]
    revoked = client.delete(f"/api/me/tokens/{listed['id']}/")

    assert listed["kind"] == "keystone"
    assert revoked.status_code == 204
    assert opens_blazar(key) == 401


def test_finding_an_application_credentials_token_is_one_query(
    make_user, django_assert_max_num_queries
):
    dora = make_user("dora-ks")
    credential = ApplicationCredential.objects.create(owner=dora, name="ci", secret_hash="x")
    _, key = tokens.issue(dora, TokenKind.KEYSTONE, credential=credential)
    request = APIRequestFactory().get(LEASES, HTTP_X_AUTH_TOKEN=key)

    with django_assert_max_num_queries(1):
        user, found = KeystoneTokenAuthentication().authenticate(request)
        assert (user.username, found.credential.name) == ("dora-ks", "ci")


@pytest.mark.slow
def test_the_openstack_cli_issues_and_revokes_a_token(cloud, make_user):
    eve = make_user("eve-ks")
    _, api_token = tokens.issue(eve)
    run = cloud("eve-ks")

    issued = as_json(run("token", "issue", "-f", "json"))
    assert issued["user_id"] == str(eve.pk)
    assert opens_blazar(issued["id"]) == 200
    stored = APIToken.objects.filter(user=eve, kind=TokenKind.KEYSTONE).count()

    run("token", "revoke", issued["id"])

    assert opens_blazar(issued["id"]) == 401
    assert opens_api(api_token) == 200
    # The revoke's own log-in is still there; only the revoked token went.
    assert APIToken.objects.filter(user=eve, kind=TokenKind.KEYSTONE).count() == stored
    assert as_json(run("reservation", "lease", "list", "-f", "json")) == []
