"""The minimal Keystone v3: what OpenStack clients ask of it before any other request."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from project.models import APIToken
from tests.openstack.fixtures import PASSWORD

TOKENS = "/identity/v3/auth/tokens"


def password_login(username, password=PASSWORD, project=None, domain="Default", **scope):
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": username, "domain": {"name": domain}, "password": password}
                },
            }
        }
    }
    if project is not None:
        body["auth"]["scope"] = {"project": {"name": project, "domain": {"name": "Default"}}}
    if scope:
        body["auth"]["scope"] = scope
    return APIClient(enforce_csrf_checks=True).post(TOKENS, body, format="json")


def keystone_error(response) -> str:
    body = response.json()["error"]
    assert body["code"] == response.status_code
    return body["message"]


@pytest.mark.parametrize("path", ["/identity/v3", "/identity/v3/"])
def test_the_version_document_links_to_itself_absolutely(db, path):
    response = APIClient().get(path)

    assert response.status_code == 200
    version = response.json()["version"]
    assert version["id"] == "v3.14"
    assert version["status"] == "stable"
    assert version["links"] == [{"rel": "self", "href": "http://testserver/identity/v3/"}]
    assert version["media-types"][0]["base"] == "application/json"


def test_the_unversioned_root_lists_v3(db):
    response = APIClient().get("/identity")

    assert response.status_code == 300
    assert [v["id"] for v in response.json()["versions"]["values"]] == ["v3.14"]


def test_a_password_log_in_gives_a_token_of_its_own_and_the_reservation_endpoint(make_user):
    alice = make_user("alice-ks")

    response = password_login("alice-ks", project="alice-ks")

    assert response.status_code == 201
    token = response.json()["token"]
    assert token["methods"] == ["password"]
    assert token["user"]["name"] == "alice-ks"
    assert token["user"]["domain"] == {"id": "default", "name": "Default"}
    assert token["project"] == {
        "id": str(alice.pk),
        "name": "alice-ks",
        "domain": {"id": "default", "name": "Default"},
    }
    assert {role["name"] for role in token["roles"]} == {"reader", "member"}
    expires = datetime.strptime(token["expires_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert expires > datetime.now(UTC)
    services = {service["type"]: service for service in token["catalog"]}
    assert services["reservation"]["endpoints"] == [
        {
            "id": "reservation-public",
            "interface": "public",
            "region": "RegionOne",
            "region_id": "RegionOne",
            "url": "http://testserver/reservation/v1",
        }
    ]
    assert services["identity"]["endpoints"][0]["url"] == "http://testserver/identity/v3"


def test_an_unscoped_log_in_is_scoped_to_the_users_own_project(make_user):
    bob = make_user("bob-ks")

    response = password_login("bob-ks")

    assert response.status_code == 201
    assert response.json()["token"]["project"]["id"] == str(bob.pk)


def test_a_system_wide_admin_holds_the_admin_role(admin_user):
    response = password_login(admin_user.username)

    assert response.status_code == 201
    assert "admin" in {role["name"] for role in response.json()["token"]["roles"]}


def test_the_public_url_setting_shapes_the_catalog(make_user, settings):
    settings.CORRAL_PUBLIC_URL = "https://corral.example.org/"
    settings.CORRAL_REGION = "lab"
    make_user("carol-ks")

    token = password_login("carol-ks").json()["token"]

    endpoint = next(s for s in token["catalog"] if s["type"] == "reservation")["endpoints"][0]
    assert endpoint["url"] == "https://corral.example.org/reservation/v1"
    assert endpoint["region"] == endpoint["region_id"] == "lab"


def test_a_wrong_password_is_a_401_and_gives_no_token(make_user):
    make_user("dave-ks")

    response = password_login("dave-ks", password="wrong")

    assert response.status_code == 401
    assert keystone_error(response) == "The request you have made requires authentication."
    assert "X-Subject-Token" not in response
    assert not APIToken.objects.filter(user__username="dave-ks").exists()


def test_repeated_wrong_passwords_lock_the_username_out(make_user, settings):
    settings.CORRAL_LOGIN_MAX_FAILURES = 2
    make_user("eve-ks")
    for _ in range(2):
        assert password_login("eve-ks", password="wrong").status_code == 401

    response = password_login("eve-ks")

    assert response.status_code == 429
    assert keystone_error(response).startswith("Too many failed log-ins for this account")
    assert int(response["Retry-After"]) > 0


def test_another_users_project_is_refused(make_user):
    make_user("frank-ks")
    make_user("grace-ks")

    response = password_login("frank-ks", project="grace-ks")

    assert response.status_code == 401
    assert "no access to project 'grace-ks'" in keystone_error(response)


def test_another_domain_is_refused(make_user):
    make_user("heidi-ks")

    response = password_login("heidi-ks", domain="Other")

    assert response.status_code == 401
    assert keystone_error(response) == "Unknown domain 'Other': Corral's users are in Default."


def test_a_body_that_is_not_json_is_a_400(db):
    response = APIClient().post(TOKENS, "{nope", content_type="application/json")

    assert response.status_code == 400
    assert keystone_error(response) == "The request body is not valid JSON."


def test_an_unknown_method_is_refused_by_name(make_user):
    body = {"auth": {"identity": {"methods": ["totp"]}}}

    response = APIClient().post(TOKENS, body, format="json")

    assert response.status_code == 401
    assert "totp" in keystone_error(response)


def _validate(caller_key, subject_key):
    return APIClient().get(TOKENS, HTTP_X_AUTH_TOKEN=caller_key, HTTP_X_SUBJECT_TOKEN=subject_key)


def test_a_client_validates_its_own_token(make_user):
    ivan = make_user("ivan-ks")
    key = password_login("ivan-ks")["X-Subject-Token"]

    response = _validate(key, key)

    assert response.status_code == 200
    assert response.json()["token"]["user"]["id"] == str(ivan.pk)


def test_another_users_token_is_not_found_and_a_bogus_caller_is_a_401(make_user):
    make_user("judy-ks")
    make_user("kim-ks")
    judy = password_login("judy-ks")["X-Subject-Token"]
    kim = password_login("kim-ks")["X-Subject-Token"]

    assert _validate(judy, kim).status_code == 404
    assert keystone_error(_validate("bogus", judy)) == (
        "The request you have made requires authentication."
    )


def test_a_revoked_token_no_longer_opens_the_reservation_api(make_user):
    make_user("liam-ks")
    key = password_login("liam-ks")["X-Subject-Token"]

    revoked = APIClient().delete(TOKENS, HTTP_X_AUTH_TOKEN=key, HTTP_X_SUBJECT_TOKEN=key)

    assert revoked.status_code == 204
    response = APIClient().get("/reservation/v1/leases", HTTP_X_AUTH_TOKEN=key)
    assert response.status_code == 401
    assert password_login("liam-ks")["X-Subject-Token"] != key


def test_the_caller_reads_their_own_user_and_project_only(make_user):
    mia = make_user("mia-ks")
    other = make_user("noah-ks")
    key = password_login("mia-ks")["X-Subject-Token"]
    client = APIClient()
    client.credentials(HTTP_X_AUTH_TOKEN=key)

    projects = client.get("/identity/v3/auth/projects").json()["projects"]
    assert [(p["id"], p["name"]) for p in projects] == [(str(mia.pk), "mia-ks")]
    assert client.get(f"/identity/v3/users/{mia.pk}/projects").status_code == 200
    assert client.get(f"/identity/v3/projects/{mia.pk}").json()["project"]["name"] == "mia-ks"
    assert client.get(f"/identity/v3/users/{mia.pk}").json()["user"]["name"] == "mia-ks"
    assert client.get(f"/identity/v3/users/{other.pk}").status_code == 404
    assert client.get(f"/identity/v3/projects/{other.pk}").status_code == 403
    assert APIClient().get("/identity/v3/auth/projects").status_code == 401


def test_another_users_project_is_keystones_policy_403_whether_it_exists_or_not(make_user):
    mia = make_user("mia-ks")
    noah = make_user("noah-ks")
    client = token_client("mia-ks")

    by_id = client.get(f"/identity/v3/projects/{noah.pk}")
    no_such_id = client.get("/identity/v3/projects/999999")
    by_name = client.get("/identity/v3/projects", {"name": "noah-ks"})
    no_such_name = client.get("/identity/v3/projects", {"name": "nobody"})
    own = client.get("/identity/v3/projects", {"name": "mia-ks"}).json()["projects"]

    for refused in (by_id, no_such_id):
        assert refused.status_code == 403
        assert keystone_error(refused) == (
            "You are not authorized to perform the requested action: identity:get_project."
        )
    for refused in (by_name, no_such_name):
        assert refused.status_code == 403
        assert keystone_error(refused) == (
            "You are not authorized to perform the requested action: identity:list_projects."
        )
    assert [project["id"] for project in own] == [str(mia.pk)]


def token_client(username: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_AUTH_TOKEN=password_login(username)["X-Subject-Token"])
    return client


def test_the_users_list_by_name_shows_a_user_themself_and_nobody_else(
    make_user, django_assert_max_num_queries
):
    mia = make_user("mia-ks")
    make_user("noah-ks")
    client = token_client("mia-ks")

    with django_assert_max_num_queries(4):
        mine = client.get("/identity/v3/users", {"name": "mia-ks"})
    theirs = client.get("/identity/v3/users", {"name": "noah-ks"})
    everyone = client.get("/identity/v3/users/")

    assert mine.status_code == 200
    (shown,) = mine.json()["users"]
    assert (shown["id"], shown["name"], shown["domain_id"], shown["enabled"]) == (
        str(mia.pk),
        "mia-ks",
        "default",
        True,
    )
    assert shown["links"]["self"].endswith(f"/identity/v3/users/{mia.pk}")
    assert theirs.json()["users"] == []
    assert [user["name"] for user in everyone.json()["users"]] == ["mia-ks"]


def test_an_admin_lists_and_shows_any_user_filtered_as_keystone_filters(admin_user, make_user):
    noah = make_user("noah-ks")
    gone = make_user("gone-ks")
    gone.is_active = False
    gone.save()
    client = token_client(admin_user.username)

    by_name = client.get("/identity/v3/users", {"name": "noah-ks"}).json()["users"]
    disabled = client.get("/identity/v3/users", {"enabled": "false"}).json()["users"]
    elsewhere = client.get("/identity/v3/users", {"domain_id": "other"}).json()["users"]
    shown = client.get(f"/identity/v3/users/{noah.pk}")

    assert [user["id"] for user in by_name] == [str(noah.pk)]
    assert [user["name"] for user in disabled] == ["gone-ks"]
    assert elsewhere == []
    assert shown.json()["user"]["name"] == "noah-ks"


def test_an_unknown_identity_url_is_a_json_404(db):
    response = APIClient().get("/identity/v3/domains")

    assert response.status_code == 404
    assert keystone_error(response) == "The resource could not be found."


def test_a_method_keystone_does_not_offer_is_a_json_405(db):
    response = APIClient().put("/identity/v3", {}, format="json")

    assert response.status_code == 405
    assert keystone_error(response) == "PUT is not allowed here."
