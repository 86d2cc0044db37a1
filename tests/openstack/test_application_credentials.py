"""Keystone application credentials: made by their owner, used by a machine to log in without
the owner's password, with the owner's grants and no more, until they expire or are deleted."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from rest_framework.test import APIClient

from project.models import ApplicationCredential
from tests.openstack.test_identity import TOKENS, keystone_error, password_login


def credentials_url(user) -> str:
    return f"/identity/v3/users/{user.pk}/application_credentials"


def client_of(user) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_X_AUTH_TOKEN=password_login(user.username)["X-Subject-Token"])
    return client


def create(user, **fields):
    return client_of(user).post(
        credentials_url(user), {"application_credential": fields}, format="json"
    )


def credential_login(**credential):
    body = {
        "auth": {
            "identity": {
                "methods": ["application_credential"],
                "application_credential": credential,
            }
        }
    }
    return APIClient(enforce_csrf_checks=True).post(TOKENS, body, format="json")


@pytest.fixture
def alice(make_user):
    return make_user("alice-ac")


@pytest.fixture
def ci(alice):
    """alice's credential "ci" and its generated secret."""
    body = create(alice, name="ci").json()["application_credential"]
    return body["id"], body["secret"]


def test_creating_shows_a_generated_secret_once_and_keeps_only_its_hash(alice):
    response = create(alice, name="ci", description="the CI farm")

    assert response.status_code == 201
    body = response.json()["application_credential"]
    assert len(body["id"]) == 32 and int(body["id"], 16) >= 0
    assert (body["name"], body["description"], body["expires_at"]) == ("ci", "the CI farm", None)
    assert (body["user_id"], body["project_id"]) == (str(alice.pk), str(alice.pk))
    assert body["unrestricted"] is False and body["access_rules"] == []
    assert len(body["secret"]) >= 64
    stored = ApplicationCredential.objects.get(pk=body["id"])
    assert body["secret"] not in stored.secret_hash
    shown = client_of(alice).get(f"{credentials_url(alice)}/{body['id']}")
    assert shown.status_code == 200
    assert "secret" not in shown.json()["application_credential"]


def test_a_given_secret_expiry_and_unrestricted_flag_are_kept(alice):
    response = create(
        alice,
        name="nightly",
        secret="my-own-secret",
        expires_at="2099-01-02T03:04:05",
        unrestricted=True,
    )

    body = response.json()["application_credential"]
    assert body["secret"] == "my-own-secret"
    assert body["expires_at"] == "2099-01-02T03:04:05.000000"
    assert body["unrestricted"] is True
    assert credential_login(id=body["id"], secret="my-own-secret").status_code == 201


def test_the_list_shows_ones_own_credentials_by_name_without_secrets(alice, make_user, ci):
    bob = make_user("bob-ac")
    create(bob, name="bobs")
    create(alice, name="another")

    listed = client_of(alice).get(credentials_url(alice)).json()["application_credentials"]
    named = client_of(alice).get(credentials_url(alice), {"name": "ci"}).json()

    assert [c["name"] for c in listed] == ["another", "ci"]
    assert all("secret" not in c for c in listed)
    assert [c["id"] for c in named["application_credentials"]] == [ci[0]]


def test_another_users_credentials_are_not_found(alice, make_user, ci):
    bob = make_user("bob-ac")
    as_bob = client_of(bob)

    assert as_bob.get(credentials_url(alice)).status_code == 404
    assert as_bob.get(f"{credentials_url(bob)}/{ci[0]}").status_code == 404
    shown = as_bob.get(f"{credentials_url(alice)}/{ci[0]}")
    deleted = as_bob.delete(f"{credentials_url(bob)}/{ci[0]}")
    made = as_bob.post(credentials_url(alice), {"application_credential": {"name": "x"}})

    assert shown.status_code == deleted.status_code == made.status_code == 404
    assert keystone_error(deleted) == f"Could not find Application Credential: {ci[0]}."
    assert ApplicationCredential.objects.filter(pk=ci[0]).exists()


def test_the_api_needs_a_token(alice):
    response = APIClient().get(credentials_url(alice))

    assert response.status_code == 401
    assert keystone_error(response) == "The request you have made requires authentication."


def test_a_duplicate_name_is_a_409(alice, ci):
    response = create(alice, name="ci")

    assert response.status_code == 409
    assert keystone_error(response).startswith(
        "Conflict occurred attempting to store application_credential"
    )


@pytest.mark.parametrize(
    "fields, message",
    [
        ({}, "Invalid input for field 'name'"),
        ({"name": "x" * 256}, "Invalid input for field 'name'"),
        ({"name": "old", "expires_at": "2001-01-01T00:00:00"}, "must be in the future"),
        ({"name": "bad", "expires_at": "tomorrow"}, "'tomorrow' is not a time"),
        ({"name": "rules", "access_rules": [{"service": "compute"}]}, "access rules"),
    ],
)
def test_invalid_fields_are_a_400(alice, fields, message):
    response = create(alice, **fields)

    assert response.status_code == 400
    assert message in keystone_error(response)
    assert not ApplicationCredential.objects.exists()


def test_a_role_the_owner_does_not_hold_cannot_be_delegated(alice):
    refused = create(alice, name="admin", roles=[{"name": "admin"}])
    allowed = create(alice, name="member", roles=[{"name": "member"}])

    assert refused.status_code == 403
    assert "'admin'" in keystone_error(refused)
    assert allowed.status_code == 201


def test_a_log_in_by_id_gives_a_token_with_the_catalog_that_opens_the_reservation_api(alice, ci):
    response = credential_login(id=ci[0], secret=ci[1])

    assert response.status_code == 201
    token = response.json()["token"]
    assert token["methods"] == ["application_credential"]
    assert token["user"]["id"] == str(alice.pk)
    assert token["application_credential"] == {"id": ci[0], "name": "ci", "restricted": True}
    assert "reservation" in {service["type"] for service in token["catalog"]}
    key = response["X-Subject-Token"]
    leases = APIClient().get("/reservation/v1/leases", HTTP_X_AUTH_TOKEN=key)
    assert (leases.status_code, leases.json()) == (200, {"leases": []})
    # The OpenStack APIs only, as in Keystone: not Corral's own API.
    assert APIClient().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401


@pytest.mark.parametrize(
    "user", [{"name": "alice-ac", "domain": {"name": "Default"}}, "by-id"], ids=["name", "id"]
)
def test_a_log_in_by_name_names_the_user(alice, ci, user):
    user = {"id": str(alice.pk)} if user == "by-id" else user

    response = credential_login(name="ci", secret=ci[1], user=user)

    assert response.status_code == 201
    assert response.json()["token"]["application_credential"]["id"] == ci[0]


def test_the_same_name_of_another_user_does_not_log_in(alice, make_user, ci):
    bob = make_user("bob-ac")

    response = credential_login(name="ci", secret=ci[1], user={"id": str(bob.pk)})

    assert response.status_code == 401


def test_a_wrong_secret_is_a_401_and_gives_no_token(ci):
    response = credential_login(id=ci[0], secret="wrong")

    assert response.status_code == 401
    assert keystone_error(response) == "The request you have made requires authentication."
    assert "X-Subject-Token" not in response


def test_an_unknown_credential_is_a_401(db):
    assert credential_login(id="0" * 32, secret="x").status_code == 401


def test_a_log_in_without_a_secret_is_a_400(ci):
    response = credential_login(id=ci[0])

    assert response.status_code == 400
    assert "secret" in keystone_error(response)


def test_an_expired_credential_and_its_tokens_are_refused(alice):
    # Sooner than a Keystone token's hour: its tokens end with it.
    expires = (timezone.now() + timedelta(minutes=30)).replace(microsecond=0)
    body = create(alice, name="short", expires_at=f"{expires:%Y-%m-%dT%H:%M:%S}").json()
    ident, secret = body["application_credential"]["id"], body["application_credential"]["secret"]
    logged_in = credential_login(id=ident, secret=secret)
    token = logged_in.json()["token"]
    assert token["expires_at"] == f"{expires:%Y-%m-%dT%H:%M:%S}.000000Z"
    key = logged_in["X-Subject-Token"]

    with time_machine.travel(expires + timedelta(seconds=1)):
        refused = credential_login(id=ident, secret=secret)
        leases = APIClient().get("/reservation/v1/leases", HTTP_X_AUTH_TOKEN=key)

    assert refused.status_code == 401
    assert leases.status_code == 401


def test_deleting_a_credential_ends_its_log_ins_and_its_tokens(alice, ci):
    key = credential_login(id=ci[0], secret=ci[1])["X-Subject-Token"]

    deleted = client_of(alice).delete(f"{credentials_url(alice)}/{ci[0]}")

    assert deleted.status_code == 204
    assert credential_login(id=ci[0], secret=ci[1]).status_code == 401
    assert APIClient().get("/reservation/v1/leases", HTTP_X_AUTH_TOKEN=key).status_code == 401
    assert client_of(alice).get(f"{credentials_url(alice)}/{ci[0]}").status_code == 404


def test_a_deactivated_owners_credential_is_refused(alice, ci):
    alice.is_active = False
    alice.save()

    assert credential_login(id=ci[0], secret=ci[1]).status_code == 401


def test_a_restricted_credentials_token_cannot_manage_credentials(alice, ci):
    client = APIClient()
    client.credentials(
        HTTP_X_AUTH_TOKEN=credential_login(id=ci[0], secret=ci[1])["X-Subject-Token"]
    )

    listed = client.get(credentials_url(alice))
    made = client.post(credentials_url(alice), {"application_credential": {"name": "more"}})
    deleted = client.delete(f"{credentials_url(alice)}/{ci[0]}")

    assert listed.status_code == 200
    assert made.status_code == deleted.status_code == 403
    assert "not allowed for managing additional application credentials" in keystone_error(made)
    assert ApplicationCredential.objects.count() == 1


def test_an_unrestricted_credentials_token_may_manage_credentials(alice):
    body = create(alice, name="boss", unrestricted=True).json()["application_credential"]
    client = APIClient()
    client.credentials(
        HTTP_X_AUTH_TOKEN=credential_login(id=body["id"], secret=body["secret"])["X-Subject-Token"]
    )

    made = client.post(
        credentials_url(alice), {"application_credential": {"name": "more"}}, format="json"
    )

    assert made.status_code == 201


def test_a_credentials_token_validates_and_revokes_itself(alice, ci):
    key = credential_login(id=ci[0], secret=ci[1])["X-Subject-Token"]

    validated = APIClient().get(TOKENS, HTTP_X_AUTH_TOKEN=key, HTTP_X_SUBJECT_TOKEN=key)
    revoked = APIClient().delete(TOKENS, HTTP_X_AUTH_TOKEN=key, HTTP_X_SUBJECT_TOKEN=key)

    assert validated.status_code == 200
    assert validated.json()["token"]["application_credential"]["id"] == ci[0]
    assert revoked.status_code == 204
    assert APIClient().get("/reservation/v1/leases", HTTP_X_AUTH_TOKEN=key).status_code == 401
    assert credential_login(id=ci[0], secret=ci[1]).status_code == 201


def test_repeated_wrong_secrets_lock_the_owner_out_from_that_address(alice, ci, settings):
    settings.CORRAL_LOGIN_MAX_FAILURES = 2
    for _ in range(2):
        assert credential_login(id=ci[0], secret="wrong").status_code == 401

    locked = credential_login(id=ci[0], secret=ci[1])
    by_password = password_login("alice-ac")

    assert locked.status_code == by_password.status_code == 429
    assert keystone_error(locked).startswith("Too many failed log-ins for this account")
    assert int(locked["Retry-After"]) > 0


def test_guessing_unknown_credentials_locks_the_address_out(alice, ci, settings):
    settings.CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS = 3
    for number in range(3):
        assert credential_login(id=f"{number:032x}", secret="guess").status_code == 401

    locked = credential_login(id=ci[0], secret=ci[1])

    assert locked.status_code == 429
    assert keystone_error(locked).startswith("Too many failed log-ins from your address")
