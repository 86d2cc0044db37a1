"""What every client of /api/ can rely on: authentication, the schema and docs, pagination,
filtering and ordering, and errors that are always JSON."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from rest_framework.test import APIClient

from hosts.models import Cluster, VmStatus
from project.access import tokens
from project.models import APIToken

pytestmark = pytest.mark.django_db

PASSWORD = "pw-Corral-1"  # what make_user gives every user

LIST_ENDPOINTS = [
    "/api/clusters/",
    "/api/hosts/",
    "/api/templates/",
    "/api/vms/",
    "/api/permissions/",
    "/api/users/",
    "/api/groups/",
    "/api/roles/",
]


@pytest.fixture
def api(admin_user, client_for):
    return client_for(admin_user)


def assert_json_error(response) -> dict:
    """The body is a JSON object with a "detail" or with field keys holding messages."""
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert isinstance(body, dict) and body
    if "detail" not in body:
        assert all(isinstance(messages, list) and messages for messages in body.values()), body
    return body


# --- Token authentication ---------------------------------------------------------------------


def test_token_endpoint_returns_a_token_for_username_and_password(make_user):
    user = make_user("tina")

    response = APIClient().post(
        "/api/auth/token/", {"username": "tina", "password": PASSWORD}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"token", "expires_at"}
    assert tokens.find(body["token"]).user == user


def test_token_endpoint_accepts_a_form_post(make_user):
    make_user("tina")

    response = APIClient().post(
        "/api/auth/token/", {"username": "tina", "password": PASSWORD}, format="multipart"
    )

    assert response.status_code == 200
    assert response.json()["token"]


def test_a_token_authenticates_api_requests(make_user):
    make_user("tina")
    client = APIClient()
    token = client.post(
        "/api/auth/token/", {"username": "tina", "password": PASSWORD}, format="json"
    ).json()["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    response = client.get("/api/me/")

    assert response.status_code == 200
    assert response.json()["username"] == "tina"


def test_asking_twice_gives_two_tokens_that_both_work(make_user):
    make_user("tina")
    body = {"username": "tina", "password": PASSWORD}

    first = APIClient().post("/api/auth/token/", body, format="json").json()["token"]
    second = APIClient().post("/api/auth/token/", body, format="json").json()["token"]

    assert first != second
    for token in (first, second):
        response = APIClient().get("/api/me/", HTTP_AUTHORIZATION=f"Token {token}")
        assert response.status_code == 200


def test_wrong_password_is_a_json_400_and_no_token(make_user):
    user = make_user("tina")

    response = APIClient().post(
        "/api/auth/token/", {"username": "tina", "password": "wrong"}, format="json"
    )

    assert response.status_code == 400
    body = assert_json_error(response)
    assert "token" not in body
    assert not APIToken.objects.filter(user=user).exists()


def test_unknown_user_is_a_json_400(db):
    response = APIClient().post(
        "/api/auth/token/", {"username": "nobody", "password": "x"}, format="json"
    )

    assert response.status_code == 400
    assert_json_error(response)


def test_inactive_user_gets_no_token(make_user):
    make_user("tina", is_active=False)

    response = APIClient().post(
        "/api/auth/token/", {"username": "tina", "password": PASSWORD}, format="json"
    )

    assert response.status_code == 400
    assert not APIToken.objects.exists()


def test_token_without_username_is_400_naming_the_field(db):
    response = APIClient().post("/api/auth/token/", {"password": "x"}, format="json")

    assert response.status_code == 400
    assert "username" in assert_json_error(response)


@pytest.mark.parametrize("header", ["Token not-a-real-token", "Token ", "Bearer abc"])
def test_a_bad_token_is_refused_with_json(make_user, header):
    make_user("tina")

    response = APIClient().get("/api/me/", HTTP_AUTHORIZATION=header)

    assert response.status_code == 401
    assert "detail" in assert_json_error(response)


def test_a_token_of_a_deactivated_user_stops_working(make_user):
    user = make_user("tina")
    token = tokens.issue(user)[1]
    user.is_active = False
    user.save()

    response = APIClient().get("/api/me/", HTTP_AUTHORIZATION=f"Token {token}")

    assert response.status_code == 401
    assert_json_error(response)


# --- Session authentication -------------------------------------------------------------------


def test_a_logged_in_session_authenticates_api_requests(make_user):
    make_user("sam")
    client = APIClient()
    assert client.login(username="sam", password=PASSWORD)

    response = client.get("/api/me/")

    assert response.status_code == 200
    assert response.json()["username"] == "sam"


def test_a_session_write_without_csrf_token_is_refused(admin_user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(admin_user)

    response = client.post("/api/clusters/", {"name": "no-csrf"}, format="json")

    assert response.status_code == 403
    assert "CSRF" in assert_json_error(response)["detail"]
    assert not Cluster.objects.filter(name="no-csrf").exists()


def test_a_token_write_needs_no_csrf_token(admin_user):
    token = tokens.issue(admin_user)[1]
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    response = client.post("/api/clusters/", {"name": "with-token"}, format="json")

    assert response.status_code == 201, response.json()


# --- Unauthenticated --------------------------------------------------------------------------


@pytest.mark.parametrize("url", LIST_ENDPOINTS + ["/api/me/"])
def test_unauthenticated_read_is_refused_with_json(url, db):
    response = APIClient().get(url)

    assert response.status_code == 401
    assert "detail" in assert_json_error(response)


@pytest.mark.parametrize("url", LIST_ENDPOINTS)
def test_unauthenticated_write_is_refused_and_stores_nothing(url, db):
    clusters_before = Cluster.objects.count()

    response = APIClient().post(url, {"name": "anon"}, format="json")

    assert response.status_code == 401
    assert "detail" in assert_json_error(response)
    assert Cluster.objects.count() == clusters_before


# --- Schema and documentation -----------------------------------------------------------------


@pytest.fixture
def schema(api):
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_schema_is_an_openapi_3_document(schema):
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Corral API"


@pytest.mark.parametrize(
    "path",
    [
        "/api/clusters/",
        "/api/clusters/{id}/",
        "/api/hosts/",
        "/api/hosts/{id}/",
        "/api/templates/",
        "/api/vms/",
        "/api/vms/{id}/",
        "/api/permissions/",
        "/api/permissions/{id}/",
        "/api/users/",
        "/api/users/{id}/deactivate/",
        "/api/groups/",
        "/api/roles/",
        "/api/me/",
        "/api/auth/token/",
    ],
)
def test_schema_lists_the_endpoint(schema, path):
    assert path in schema["paths"]


def test_schema_documents_list_filters_and_pagination(schema):
    names = {p["name"] for p in schema["paths"]["/api/vms/"]["get"]["parameters"]}

    assert {"cluster", "status", "name__icontains", "ordering", "limit", "offset", "q"} <= names


def test_schema_names_a_pool_allocation_and_a_lease_host_allocation_apart(schema):
    components = schema["components"]["schemas"]
    allocatevm = schema["paths"]["/api/vmpools/{id}/allocatevm/"]["post"]["responses"]["200"]

    assert allocatevm["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PoolAllocation"
    }
    assert set(components["PoolAllocation"]["properties"]) == {"vm", "job", "instant"}
    assert components["Reservation"]["properties"]["allocations"]["items"] == {
        "$ref": "#/components/schemas/HostAllocation"
    }
    assert set(components["HostAllocation"]["properties"]) == {
        "host",
        "host_name",
        "slots",
        "whole_host",
    }


def test_schema_documents_token_and_session_authentication(schema):
    schemes = schema["components"]["securitySchemes"]

    assert schemes["tokenAuth"]["name"] == "Authorization"
    assert schemes["cookieAuth"]["in"] == "cookie"
    assert {"tokenAuth": []} in schema["paths"]["/api/vms/"]["get"]["security"]


def test_schema_is_served_as_yaml_by_default(api):
    response = api.get("/api/schema/")

    assert response.status_code == 200
    assert response.content.startswith(b"openapi: 3.")


def _asset_urls(html: str) -> list[str]:
    """Where the page loads its scripts, styles and icon from."""
    return re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', html)


def test_docs_page_is_swagger_ui_started_by_a_script_pointing_at_the_schema(api):
    response = api.get("/api/docs/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert 'id="swagger-ui"' in html
    assert "/api/docs/?script=" in _asset_urls(html)
    # No script in the page itself: the Content-Security-Policy allows none.
    assert not re.search(r"<script[^>]*>\s*[^<\s]", html)

    script = api.get("/api/docs/", {"script": ""})
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert 'url: "/api/schema/"' in script.content.decode()


def test_docs_page_loads_every_asset_from_our_static_files(api):
    html = api.get("/api/docs/").content.decode()

    urls = [url for url in _asset_urls(html) if url != "/api/docs/?script="]

    assert any(url.endswith("swagger-ui-bundle.js") for url in urls)
    assert all(url.startswith(settings.STATIC_URL) for url in urls), urls
    assert "cdn" not in html.lower()


def test_docs_page_scripts_are_shipped_with_corral(api):
    html = api.get("/api/docs/").content.decode()
    scripts = [url for url in _asset_urls(html) if url.endswith(".js")]

    files = [finders.find(url.removeprefix(settings.STATIC_URL)) for url in scripts]

    assert scripts
    assert all(files), dict(zip(scripts, files, strict=True))
    assert all(Path(path).stat().st_size > 1000 for path in files)


# --- Pagination -------------------------------------------------------------------------------


@pytest.fixture
def seven_clusters(make_cluster):
    return [make_cluster(f"c{i}") for i in range(7)]


def test_a_list_is_paginated_with_count_next_and_previous(api, seven_clusters):
    response = api.get("/api/clusters/", {"limit": 3})

    body = response.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 7
    assert [row["name"] for row in body["results"]] == ["c0", "c1", "c2"]
    assert "limit=3" in body["next"] and "offset=3" in body["next"]
    assert body["previous"] is None


def test_following_next_gives_the_following_page(api, seven_clusters):
    next_url = api.get("/api/clusters/", {"limit": 3}).json()["next"]

    body = api.get(next_url).json()

    assert [row["name"] for row in body["results"]] == ["c3", "c4", "c5"]
    assert body["previous"] is not None


def test_the_last_page_has_no_next(api, seven_clusters):
    body = api.get("/api/clusters/", {"limit": 3, "offset": 6}).json()

    assert [row["name"] for row in body["results"]] == ["c6"]
    assert body["next"] is None
    assert body["count"] == 7


def test_a_list_defaults_to_fifty_rows(api):
    Cluster.objects.bulk_create(Cluster(name=f"c{i:03}") for i in range(51))

    body = api.get("/api/clusters/").json()

    assert body["count"] == 51
    assert len(body["results"]) == 50
    assert body["next"] is not None


# --- Filtering, search and ordering -----------------------------------------------------------


@pytest.fixture
def two_clusters_of_vms(make_cluster, make_vm):
    red, blue = make_cluster("red"), make_cluster("blue")
    make_vm(red, name="red-web", status=VmStatus.UP)
    make_vm(red, name="red-db", status=VmStatus.DOWN)
    make_vm(blue, name="blue-web", status=VmStatus.PAUSED)
    return red, blue


def names(response) -> list[str]:
    assert response.status_code == 200, response.json()
    return sorted(row["name"] for row in response.json()["results"])


def test_vms_filter_by_cluster(api, two_clusters_of_vms):
    red, _ = two_clusters_of_vms

    assert names(api.get("/api/vms/", {"cluster": red.pk})) == ["red-db", "red-web"]


def test_vms_filter_by_status(api, two_clusters_of_vms):
    assert names(api.get("/api/vms/", {"status": "up"})) == ["red-web"]


def test_vms_filter_by_several_statuses(api, two_clusters_of_vms):
    response = api.get("/api/vms/?status=up&status=paused")

    assert names(response) == ["blue-web", "red-web"]


def test_filters_combine(api, two_clusters_of_vms):
    red, _ = two_clusters_of_vms

    assert names(api.get("/api/vms/", {"cluster": red.pk, "status": "down"})) == ["red-db"]


def test_vms_filter_by_name_containing_any_case(api, two_clusters_of_vms):
    assert names(api.get("/api/vms/", {"name__icontains": "WEB"})) == ["blue-web", "red-web"]


def test_hosts_filter_by_cluster(api, make_cluster, make_host):
    red, blue = make_cluster("red"), make_cluster("blue")
    make_host(red, name="red-kvm")
    make_host(blue, name="blue-kvm")

    assert names(api.get("/api/hosts/", {"cluster": blue.pk})) == ["blue-kvm"]


def test_clusters_filter_by_name_containing(api, make_cluster):
    make_cluster("prod-east")
    make_cluster("prod-west")
    make_cluster("lab")

    assert names(api.get("/api/clusters/", {"name__icontains": "prod"})) == [
        "prod-east",
        "prod-west",
    ]


def test_search_with_q(api, two_clusters_of_vms):
    assert names(api.get("/api/vms/", {"q": "db"})) == ["red-db"]


def test_ordering_by_name_descending(api, make_cluster):
    for name in ["bravo", "alpha", "charlie"]:
        make_cluster(name)

    response = api.get("/api/clusters/", {"ordering": "-name"})

    assert [row["name"] for row in response.json()["results"]] == ["charlie", "bravo", "alpha"]


def test_ordering_by_name_ascending(api, two_clusters_of_vms):
    response = api.get("/api/vms/", {"ordering": "name"})

    assert [row["name"] for row in response.json()["results"]] == [
        "blue-web",
        "red-db",
        "red-web",
    ]


@pytest.mark.parametrize(
    "url,field",
    [
        ("/api/vms/?cluster=abc", "cluster"),
        ("/api/vms/?cluster=999999", "cluster"),
        ("/api/vms/?status=bogus", "status"),
        ("/api/hosts/?status=sideways", "status"),
        ("/api/hosts/?cluster=1.5", "cluster"),
        ("/api/templates/?os_type=amiga", "os_type"),
        ("/api/vms/?host=none", "host"),
    ],
)
def test_an_invalid_filter_value_is_a_json_400_naming_the_filter(api, url, field):
    response = api.get(url)

    assert response.status_code == 400
    assert field in assert_json_error(response)


def test_an_unknown_ordering_field_is_a_json_400_naming_the_parameter(api, two_clusters_of_vms):
    response = api.get("/api/vms/", {"ordering": "password"})

    assert response.status_code == 400
    assert assert_json_error(response) == {
        "ordering": ["Cannot order by 'password'; use name, id, status, cluster, host, created_at."]
    }


# --- Errors are JSON --------------------------------------------------------------------------


def test_a_missing_object_is_a_json_404(api):
    response = api.get("/api/vms/999999/")

    assert response.status_code == 404
    assert "detail" in assert_json_error(response)


@pytest.mark.parametrize("url", ["/api/no-such-thing/", "/api/permissions/x1/", "/api/vms/abc/"])
def test_an_unknown_api_url_is_a_json_404(api, url):
    response = api.get(url)

    assert response.status_code == 404
    assert "detail" in assert_json_error(response)


def test_a_missing_object_seen_anonymously_is_still_json(db):
    response = APIClient().get("/api/no-such-thing/")

    assert response.status_code == 404
    assert_json_error(response)


def test_a_field_error_names_the_field(api):
    response = api.post("/api/clusters/", {"name": "bad name"}, format="json")

    assert response.status_code == 400
    assert list(assert_json_error(response)) == ["name"]


def test_a_missing_required_field_is_named(api):
    response = api.post("/api/hosts/", {}, format="json")

    assert response.status_code == 400
    assert {"name", "cluster", "uri"} <= set(assert_json_error(response))


def test_malformed_json_is_a_json_400(api):
    response = api.generic("POST", "/api/clusters/", '{"name": ', content_type="application/json")

    assert response.status_code == 400
    assert "detail" in assert_json_error(response)


def test_an_unsupported_media_type_is_a_json_415(api):
    response = api.generic("POST", "/api/clusters/", "name=x", content_type="text/csv")

    assert response.status_code == 415
    assert "detail" in assert_json_error(response)


def test_a_method_not_allowed_is_a_json_405(api):
    response = api.delete("/api/users/1/")

    assert response.status_code == 405
    assert "detail" in assert_json_error(response)


def test_a_forbidden_action_is_a_json_403(make_user, grant, client_for, make_cluster):
    user = make_user()
    grant(user, "PowerUser", make_cluster())

    response = client_for(user).post("/api/clusters/", {"name": "not-mine"}, format="json")

    assert response.status_code == 403
    assert "detail" in assert_json_error(response)


def test_a_conflict_is_a_json_409(api, make_host):
    host = make_host()

    response = api.delete(f"/api/clusters/{host.cluster_id}/")

    assert response.status_code == 409
    assert "detail" in assert_json_error(response)
