"""``GET /api/``: the API's collections, each with its absolute URL, for authenticated callers."""

import pytest
from rest_framework.test import APIClient

from project.access.tokens import issue as issue_token
from tests.project.api.routes import api_routes

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user)[1]}")
    return client


def test_the_root_lists_the_collections_with_absolute_urls(make_user):
    response = token_client(make_user("ann")).get("/api/")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    root = response.json()
    assert root["vms"] == "http://testserver/api/vms/"
    assert root["vmpools"] == "http://testserver/api/vmpools/"
    assert root["me/sshkeys"] == "http://testserver/api/me/sshkeys/"
    assert root["docs"] == "http://testserver/api/docs/"


def test_the_root_lists_every_top_level_collection(make_user):
    collections = {
        route.path
        for route in api_routes()
        if "list" in route.actions.values() and "{" not in route.path
    }

    root = token_client(make_user("ann")).get("/api/").json()

    assert collections - {url.removeprefix("http://testserver") for url in root.values()} == set()


def test_the_root_answers_a_logged_in_browser_session(client, make_user):
    client.force_login(make_user("ann"))

    response = client.get("/api/", HTTP_ACCEPT="application/json")

    assert response.json()["leases"] == "http://testserver/api/leases/"


def test_the_root_asks_an_anonymous_caller_to_authenticate():
    response = APIClient().get("/api/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
