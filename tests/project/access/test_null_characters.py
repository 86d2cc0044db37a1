"""Names holding a null character, in grant, user and group bodies and in the grant filters:
a field message, never a server error (PostgreSQL refuses such text outright)."""

import pytest
from django.contrib.auth.models import Group

from project.models import Role

NULL = "Null characters are not allowed."


@pytest.fixture
def admin(admin_user, client_for):
    return client_for(admin_user)


@pytest.mark.parametrize("field", ["user", "group", "role"])
def test_a_grant_naming_someone_with_a_null_character_is_a_field_error(admin, make_cluster, field):
    cluster = make_cluster()
    body = {"role": "PowerUser", "object_type": "cluster", "object_id": cluster.pk}
    body[field] = "name\x00"
    if field == "role":
        body["user"] = "root-admin"

    response = admin.post("/api/permissions/", body)

    assert response.status_code == 400
    assert response.json()[field] == [NULL]


@pytest.mark.parametrize("field", ["user", "group", "role"])
def test_filtering_grants_by_a_name_with_a_null_character_is_a_field_error(admin, field):
    response = admin.get("/api/permissions/", {field: "name\x00"})

    assert response.status_code == 400
    assert response.json() == {field: [NULL]}


def test_a_user_in_a_group_named_with_a_null_character_is_refused(admin):
    body = {"username": "nul-groups", "password": "Long-enough-pass-42", "groups": ["g\x00"]}

    response = admin.post("/api/users/", body)

    assert response.status_code == 400
    assert response.json()["groups"] == [NULL]


@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_group_member_named_with_a_null_character_is_refused(admin, method):
    group = Group.objects.create(name="nul-members")

    response = getattr(admin, method)(
        f"/api/groups/{group.pk}/", {"name": "nul-members", "users": ["\x00"]}
    )

    assert response.status_code == 400
    assert response.json()["users"] == [NULL]
    assert not group.user_set.exists()


def test_a_role_with_a_null_character_in_an_action_is_refused(admin):
    response = admin.post("/api/roles/", {"name": "NulRole", "actions": ["hosts.view_vm\x00"]})

    assert response.status_code == 400
    assert not Role.objects.filter(name="NulRole").exists()
