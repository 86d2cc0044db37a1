"""Requests Django refuses before any API view runs: a ``Host`` header not in ALLOWED_HOSTS,
a path no route matches. Under /api/ each answer is a JSON object (with DEBUG on too, for the
paths); outside /api/ the pages stay HTML.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.conftest import stored_rows

METHODS = ["get", "post", "put", "patch", "delete"]
UNKNOWN_PATHS = ["/api/nope", "/api/nope/", "/api/clusters", "/api/vms/1/start", "/api/x/y/z/"]
NOT_FOUND = {"detail": "Not found."}


@pytest.fixture
def api(admin_user, client_for):
    return client_for(admin_user)


def json_error(response) -> dict:
    assert response["Content-Type"] == "application/json", response.content[:300]
    body = response.json()
    assert isinstance(body, dict) and body, body
    return body


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("path", UNKNOWN_PATHS)
def test_an_unknown_api_path_is_a_json_404_for_every_method(world, api, path, method, debug):
    """With or without the trailing slash: no redirect to the path with one (a POST could not
    follow it, and DEBUG would raise instead), no HTML page."""
    before = stored_rows()

    with override_settings(DEBUG=debug):
        response = api.generic(
            method.upper(), path, '{"name": "x"}', content_type="application/json"
        )

    assert response.status_code == 404
    assert json_error(response) == NOT_FOUND
    assert stored_rows() == before


def test_an_unknown_api_path_is_a_json_404_without_credentials(db, client_for):
    response = client_for(None).post("/api/nope", {}, format="json")

    assert response.status_code == 404
    assert json_error(response) == NOT_FOUND


@pytest.mark.parametrize("path", ["/api/clusters/", "/api/nope/", "/api/auth/token/"])
def test_a_host_header_not_allowed_is_a_json_400(world, api, path):
    before = stored_rows()

    response = api.post(path, {"name": "x"}, format="json", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert json_error(response) == {"detail": "This server does not answer for that host."}
    assert stored_rows() == before


def test_outside_the_api_a_host_header_not_allowed_is_an_html_400(db, client_for):
    response = client_for(None).get("/login/", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/nope/", "/leases/nope/"])
def test_outside_the_api_an_unknown_path_is_an_html_404(admin_user, client_for, path):
    response = client_for(admin_user).get(path)

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_outside_the_api_a_path_without_its_slash_still_redirects(db, client_for):
    response = client_for(None).get("/login")

    assert response.status_code == 301
    assert response["Location"] == "/login/"
