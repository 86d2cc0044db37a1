"""JSON nested deeper than any body takes, sent to each OpenStack API (and inside Blazar's
expression strings): a 400 in that API's own error shape, never a 500 or a page, and nothing
stored. (Corral's own API: tests/security/test_bad_input_api.py.)"""

from __future__ import annotations

import json

import pytest

from project.json_input import MAX_DEPTH
from tests.conftest import stored_rows
from tests.leases.fixtures import at
from tests.openstack.conftest import API, cli_hosts, cli_instances, lease_body

DEEP = "[" * 100_000
TOO_DEEP = f"Nested deeper than {MAX_DEPTH} levels."
PARSE_ERROR = f"JSON parse error - nested deeper than {MAX_DEPTH} levels."
PATCH = "application/openstack-images-v2.1-json-patch"


def nested(levels: int):
    value = "deep"
    for _ in range(levels):
        value = [value]
    return value


@pytest.fixture
def user(lease_user, grant):
    user = lease_user("deep")
    grant(user, "ClusterAdmin")
    return user


@pytest.fixture
def as_user(blazar_for, user):
    return blazar_for(user)


def keystone_error(response) -> str:
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["error"]["code"] == 400 and body["error"]["title"] == "Bad Request"
    return body["error"]["message"]


def test_a_log_in_body_nested_too_deep_is_keystones_400(client, db):
    before = stored_rows()

    response = client.post("/identity/v3/auth/tokens", DEEP, content_type="application/json")

    assert keystone_error(response) == f"The request body is refused: {TOO_DEEP}"
    assert stored_rows() == before


def test_a_log_in_nested_too_deep_inside_is_keystones_400(client, db):
    body = {"auth": {"identity": {"methods": ["password"], "password": nested(MAX_DEPTH + 5)}}}

    response = client.post(
        "/identity/v3/auth/tokens", json.dumps(body), content_type="application/json"
    )

    assert keystone_error(response) == f"The request body is refused: {TOO_DEEP}"


def test_an_application_credential_body_nested_too_deep_is_keystones_400(user, as_user):
    before = stored_rows()

    response = as_user.post(
        f"/identity/v3/users/{user.pk}/application_credentials",
        DEEP,
        content_type="application/json",
    )

    assert keystone_error(response) == f"The request body is refused: {TOO_DEEP}"
    assert stored_rows() == before


def test_a_nova_body_nested_too_deep_is_novas_400(as_user):
    before = stored_rows()

    response = as_user.post("/compute/v2.1/os-keypairs", DEEP, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"badRequest": {"code": 400, "message": PARSE_ERROR}}
    assert stored_rows() == before


@pytest.mark.parametrize(
    "path,content_type",
    [("/image/v2/images", "application/json"), ("/image/v2/images/{id}", PATCH)],
    ids=["create", "json-patch"],
)
def test_a_glance_body_nested_too_deep_is_glances_400(as_user, path, content_type):
    created = as_user.post(
        "/image/v2/images", {"disk_format": "qcow2", "container_format": "bare"}, format="json"
    )
    assert created.status_code == 201, created.content
    before = stored_rows()
    method = as_user.post if content_type == "application/json" else as_user.patch

    response = method(path.format(id=created.json()["id"]), DEEP, content_type=content_type)

    assert response.status_code == 400
    assert response.json() == {
        "message": PARSE_ERROR,
        "code": "400 Bad Request",
        "title": "Bad Request",
    }
    assert stored_rows() == before


def blazar_error(response) -> str:
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body == {**body, "error_code": 400, "error_name": "BAD_REQUEST"}
    return body["error_message"]


def test_a_blazar_body_nested_too_deep_is_blazars_400(as_user):
    before = stored_rows()

    response = as_user.post(f"{API}/leases", DEEP, content_type="application/json")

    assert blazar_error(response) == PARSE_ERROR
    assert stored_rows() == before


@pytest.mark.parametrize(
    "reservation",
    [
        cli_instances(1, resource_properties=DEEP),
        cli_hosts(1, 1, resource_properties=DEEP),
        cli_hosts(1, 1, hypervisor_properties=DEEP),
    ],
    ids=["instance resource_properties", "host resource_properties", "hypervisor_properties"],
)
def test_a_blazar_expression_nested_too_deep_is_blazars_400(as_user, reservation):
    field = (
        "hypervisor_properties"
        if reservation.get("hypervisor_properties")
        else "resource_properties"
    )
    before = stored_rows()

    response = as_user.post(
        f"{API}/leases", lease_body("deep", at(9), at(12), reservation), format="json"
    )

    assert blazar_error(response) == f"{field}: {TOO_DEEP}"
    assert stored_rows() == before
