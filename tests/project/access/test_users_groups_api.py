"""/api/users/, /api/groups/, /api/auth/token/ and /api/me/: accounts, logging in, groups."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from project.models import APIToken
from tests.project.access.conftest import STRONG_PASSWORD, listed_ids

User = get_user_model()
TOKEN_URL = "/api/auth/token/"


def login(client, username: str, password: str):
    return client.post(TOKEN_URL, {"username": username, "password": password})


@pytest.fixture
def anonymous(client_for):
    return client_for(None)


@pytest.fixture
def superuser_client(admin_user, client_for):
    return client_for(admin_user)


@pytest.fixture
def alice(superuser_client):
    """A user made through the API, with a known password."""
    response = superuser_client.post(
        "/api/users/",
        {"username": "alice", "password": STRONG_PASSWORD, "first_name": "Alice"},
    )
    assert response.status_code == 201, response.content
    return User.objects.get(username="alice")


# Creating users and logging in.


def test_admin_creates_a_user_and_the_password_is_never_shown(superuser_client):
    response = superuser_client.post(
        "/api/users/", {"username": "bob", "password": STRONG_PASSWORD, "email": "b@example.org"}
    )

    assert response.status_code == 201, response.content
    assert response.json()["username"] == "bob"
    assert response.json()["is_active"] is True
    assert "password" not in response.json()
    assert User.objects.get(username="bob").check_password(STRONG_PASSWORD)


def test_system_superuser_role_may_create_users(caller, client_for):
    admin = caller("SuperUser", via="group")

    response = client_for(admin).post(
        "/api/users/", {"username": "bob", "password": STRONG_PASSWORD}
    )

    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "password",
    ["short", "12345678901", "password123", "carol-smith"],
    ids=["too-short", "numeric", "common", "like-the-username"],
)
def test_weak_password_is_a_field_error_and_no_user_is_made(password, superuser_client):
    response = superuser_client.post(
        "/api/users/", {"username": "carol-smith", "password": password}
    )

    assert response.status_code == 400
    assert response.json()["password"]
    assert not User.objects.filter(username="carol-smith").exists()


def test_new_user_needs_a_password(superuser_client):
    response = superuser_client.post("/api/users/", {"username": "dave"})

    assert response.status_code == 400
    assert response.json() == {"password": ["A new user needs a password."]}


def test_duplicate_username_is_a_field_error(alice, superuser_client):
    response = superuser_client.post(
        "/api/users/", {"username": "alice", "password": STRONG_PASSWORD}
    )

    assert response.status_code == 400
    assert response.json()["username"]


def test_new_user_gets_a_token_and_calls_the_api_with_it(alice, anonymous, token_client):
    token = login(anonymous, "alice", STRONG_PASSWORD).json()["token"]

    response = token_client(token).get("/api/me/")

    assert response.status_code == 200
    assert response.json()["username"] == "alice"
    assert response.json()["grants"] == []


def test_wrong_password_gets_no_token(alice, anonymous):
    response = login(anonymous, "alice", "Not-the-password-1")

    assert response.status_code == 400
    assert "token" not in response.json()
    assert not APIToken.objects.filter(user=alice).exists()


def test_unknown_token_is_refused(token_client, db):
    response = token_client("0" * 40).get("/api/me/")

    assert (response.status_code, response.json()) == (401, {"detail": "Invalid token."})


# Deactivating and activating.


def test_deactivated_user_cannot_get_a_token(alice, superuser_client, anonymous):
    response = superuser_client.post(f"/api/users/{alice.pk}/deactivate/")

    assert response.status_code == 200
    assert response.json()["is_active"] is False
    assert login(anonymous, "alice", STRONG_PASSWORD).status_code == 400


def test_deactivated_users_existing_token_stops_working(
    alice, superuser_client, anonymous, token_client
):
    token = login(anonymous, "alice", STRONG_PASSWORD).json()["token"]

    superuser_client.post(f"/api/users/{alice.pk}/deactivate/")

    response = token_client(token).get("/api/me/")
    assert (response.status_code, response.json()) == (401, {"detail": "Invalid token."})


def test_deactivating_keeps_the_users_grants(alice, superuser_client, grant, home):
    given = grant(alice, "UserRole", home.vm)

    superuser_client.post(f"/api/users/{alice.pk}/deactivate/")

    assert superuser_client.get(f"/api/permissions/{given.id}/").status_code == 200


def test_activated_user_logs_in_again(alice, superuser_client, anonymous, token_client):
    superuser_client.post(f"/api/users/{alice.pk}/deactivate/")

    response = superuser_client.post(f"/api/users/{alice.pk}/activate/")

    assert response.status_code == 200
    assert response.json()["is_active"] is True
    token = login(anonymous, "alice", STRONG_PASSWORD).json()["token"]
    assert token_client(token).get("/api/me/").status_code == 200


def test_admin_cannot_deactivate_themselves(admin_user, superuser_client):
    response = superuser_client.post(f"/api/users/{admin_user.pk}/deactivate/")

    assert response.status_code == 400
    admin_user.refresh_from_db()
    assert admin_user.is_active


def test_user_cannot_deactivate_themselves(alice, client_for):
    response = client_for(alice).post(f"/api/users/{alice.pk}/deactivate/")

    assert response.status_code == 403
    alice.refresh_from_db()
    assert alice.is_active


def test_users_are_never_deleted(alice, superuser_client):
    response = superuser_client.delete(f"/api/users/{alice.pk}/")

    assert response.status_code == 405
    assert User.objects.filter(pk=alice.pk).exists()


# What ordinary users see and may change about themselves.


def test_ordinary_user_lists_only_themselves(alice, make_user, client_for):
    make_user()

    shown = listed_ids(client_for(alice).get("/api/users/"))

    assert shown == [alice.pk]


def test_ordinary_user_gets_404_on_another_user(alice, make_user, client_for):
    other = make_user()

    assert client_for(alice).get(f"/api/users/{other.pk}/").status_code == 404
    assert client_for(alice).patch(f"/api/users/{other.pk}/", {"first_name": "X"}).status_code == (
        404
    )


def test_user_changes_their_own_name(alice, client_for):
    response = client_for(alice).patch(
        f"/api/users/{alice.pk}/", {"first_name": "Alicia", "last_name": "Liddell"}
    )

    assert response.status_code == 200, response.content
    alice.refresh_from_db()
    assert (alice.first_name, alice.last_name) == ("Alicia", "Liddell")


def test_user_changes_their_own_password_and_logs_in_with_it(alice, client_for, anonymous):
    new_password = "Another-long-pass-77"

    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"password": new_password})

    assert response.status_code == 200, response.content
    assert login(anonymous, "alice", new_password).status_code == 200
    assert login(anonymous, "alice", STRONG_PASSWORD).status_code == 400


def test_user_cannot_set_a_weak_password_on_themselves(alice, client_for):
    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"password": "alice"})

    assert response.status_code == 400
    assert response.json()["password"]
    alice.refresh_from_db()
    assert alice.check_password(STRONG_PASSWORD)


def test_user_cannot_make_themselves_staff(alice, client_for):
    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"is_staff": True})

    assert response.status_code == 403
    alice.refresh_from_db()
    assert not alice.is_staff


def test_user_cannot_add_themselves_to_a_group(alice, make_group, client_for):
    admins = make_group(name="admins")

    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"groups": ["admins"]})

    assert response.status_code == 403
    assert not admins.user_set.filter(pk=alice.pk).exists()


def test_superuser_flag_cannot_be_set_through_the_api(alice, superuser_client):
    response = superuser_client.patch(f"/api/users/{alice.pk}/", {"is_superuser": True})

    assert response.status_code == 200
    alice.refresh_from_db()
    assert not alice.is_superuser


def test_admin_puts_a_user_in_groups(alice, make_group, superuser_client):
    make_group(name="operators")

    response = superuser_client.patch(f"/api/users/{alice.pk}/", {"groups": ["operators"]})

    assert response.status_code == 200, response.content
    assert response.json()["groups"] == ["operators"]


def test_user_list_queries_do_not_grow_with_the_users(
    make_user, make_group, superuser_client, django_assert_max_num_queries
):
    group = make_group()
    for _ in range(20):
        group.user_set.add(make_user())

    with django_assert_max_num_queries(6):
        response = superuser_client.get("/api/users/", {"limit": 100})

    assert response.json()["count"] == 21


# Groups.


def test_admin_creates_a_group_with_users(alice, make_user, superuser_client):
    bob = make_user("bob")

    response = superuser_client.post(
        "/api/groups/", {"name": "operators", "users": ["alice", "bob"]}
    )

    assert response.status_code == 201, response.content
    assert sorted(response.json()["users"]) == ["alice", "bob"]
    assert set(Group.objects.get(name="operators").user_set.all()) == {alice, bob}


def test_group_with_an_unknown_member_is_a_field_error(superuser_client):
    response = superuser_client.post("/api/groups/", {"name": "operators", "users": ["ghost"]})

    assert response.status_code == 400
    assert response.json()["users"]
    assert not Group.objects.filter(name="operators").exists()


def test_role_granted_to_a_group_reaches_its_members_only(
    alice, make_user, superuser_client, client_for, home
):
    outsider = make_user()
    vm = home.vm
    superuser_client.post("/api/groups/", {"name": "operators", "users": ["alice"]})

    response = superuser_client.post(
        "/api/permissions/",
        {"role": "UserRole", "group": "operators", "object_type": "vm", "object_id": vm.pk},
    )

    assert response.status_code == 201, response.content
    assert client_for(alice).get(f"/api/vms/{vm.pk}/").status_code == 200
    assert client_for(outsider).get(f"/api/vms/{vm.pk}/").status_code == 404


def test_joining_a_group_gives_access_and_leaving_takes_it_away(
    alice, make_group, grant, superuser_client, client_for, home
):
    vm = home.vm
    grant(make_group(name="operators"), "UserRole", vm)
    client = client_for(alice)

    superuser_client.patch(f"/api/users/{alice.pk}/", {"groups": ["operators"]})
    while_member = client.get(f"/api/vms/{vm.pk}/").status_code
    superuser_client.patch(f"/api/users/{alice.pk}/", {"groups": []})
    after_leaving = client.get(f"/api/vms/{vm.pk}/").status_code

    assert (while_member, after_leaving) == (200, 404)


def test_group_with_several_members_is_listed_once(make_user, make_group, superuser_client):
    group = make_group(make_user(), make_user(), make_user())

    response = superuser_client.get("/api/groups/")

    assert listed_ids(response) == [group.pk]
    assert response.json()["count"] == 1


def test_ordinary_user_sees_only_their_groups(alice, make_group, client_for):
    mine = make_group(alice)
    make_group()

    shown = listed_ids(client_for(alice).get("/api/groups/"))

    assert shown == [mine.pk]


def test_ordinary_user_gets_404_on_another_group(alice, make_group, client_for):
    other = make_group()

    assert client_for(alice).get(f"/api/groups/{other.pk}/").status_code == 404


def test_member_cannot_change_their_group(alice, make_user, make_group, client_for):
    group = make_group(alice)
    bob = make_user()

    response = client_for(alice).patch(
        f"/api/groups/{group.pk}/", {"users": [alice.username, bob.username]}
    )

    assert response.status_code == 403
    assert list(group.user_set.all()) == [alice]


def test_ordinary_user_cannot_create_groups(alice, client_for):
    response = client_for(alice).post("/api/groups/", {"name": "mine", "users": ["alice"]})

    assert response.status_code == 403
    assert not Group.objects.filter(name="mine").exists()


def test_group_list_queries_do_not_grow_with_the_groups(
    make_user, make_group, superuser_client, django_assert_max_num_queries
):
    for _ in range(20):
        make_group(make_user(), make_user())

    with django_assert_max_num_queries(6):
        response = superuser_client.get("/api/groups/", {"limit": 100})

    assert response.json()["count"] == 20


# /api/me/


def test_me_shows_the_caller_and_their_groups(alice, make_group, client_for):
    make_group(alice, name="operators")

    body = client_for(alice).get("/api/me/").json()

    assert {k: body[k] for k in ("id", "username", "first_name", "groups", "is_superuser")} == {
        "id": alice.pk,
        "username": "alice",
        "first_name": "Alice",
        "groups": ["operators"],
        "is_superuser": False,
    }
