"""Accounts: usernames are unique regardless of case wherever a user is made or renamed (the
API, the admin console, createsuperuser, the demo command, the database itself), and only
whoever may change users (a system-wide grant) renames anyone, themselves included."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from project.access.accounts import RENAME_REFUSED

User = get_user_model()
PASSWORD = "pw-Corral-1"  # what make_user gives everyone
NEW_PASSWORD = "Long-enough-pass-42"
TAKEN = "A user named 'alice' exists already; usernames ignore case."


@pytest.fixture
def alice(make_user):
    return make_user("alice", first_name="Alice")


@pytest.fixture
def bob(make_user):
    return make_user("bob")


def console(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def usernames() -> list[str]:
    return sorted(User.objects.values_list("username", flat=True))


# -- renaming through the API -------------------------------------------------------------------


def test_a_user_cannot_rename_themselves_through_the_api(alice, client_for):
    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"username": "queen"})

    assert response.status_code == 403
    assert response.json() == {"username": [RENAME_REFUSED]}
    alice.refresh_from_db()
    assert alice.username == "alice"


def test_a_refused_rename_changes_nothing_else_sent_with_it(alice, client_for):
    response = client_for(alice).patch(
        f"/api/users/{alice.pk}/", {"username": "queen", "first_name": "Queen"}
    )

    assert response.status_code == 403
    alice.refresh_from_db()
    assert (alice.username, alice.first_name) == ("alice", "Alice")


def test_a_user_may_send_their_own_unchanged_username(alice, client_for):
    response = client_for(alice).put(
        f"/api/users/{alice.pk}/", {"username": "alice", "first_name": "Alicia"}
    )

    assert response.status_code == 200, response.content
    alice.refresh_from_db()
    assert (alice.username, alice.first_name) == ("alice", "Alicia")


def test_a_user_cannot_change_the_case_of_their_own_username(alice, client_for):
    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"username": "Alice"})

    assert response.status_code == 403
    assert response.json() == {"username": [RENAME_REFUSED]}
    alice.refresh_from_db()
    assert alice.username == "alice"


def test_a_superuser_role_on_a_cluster_does_not_let_its_holder_rename_themselves(
    alice, grant, make_cluster, client_for
):
    grant(alice, "SuperUser", make_cluster())

    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"username": "queen"})

    assert response.status_code == 403
    assert response.json() == {"username": [RENAME_REFUSED]}
    alice.refresh_from_db()
    assert alice.username == "alice"


def test_an_admin_renames_a_user_who_then_logs_in_under_the_new_name(alice, admin_user, client_for):
    response = client_for(admin_user).patch(f"/api/users/{alice.pk}/", {"username": "queen"})

    assert response.status_code == 200, response.content
    assert response.json()["username"] == "queen"
    token = client_for().post("/api/auth/token/", {"username": "queen", "password": PASSWORD})
    assert token.status_code == 200
    assert "token" in token.json()


def test_a_system_wide_superuser_role_may_rename_its_holder(alice, grant, client_for):
    grant(alice, "SuperUser")

    response = client_for(alice).patch(f"/api/users/{alice.pk}/", {"username": "queen"})

    assert response.status_code == 200, response.content
    alice.refresh_from_db()
    assert alice.username == "queen"


def test_an_admin_may_change_only_the_case_of_a_username(alice, admin_user, client_for):
    response = client_for(admin_user).patch(f"/api/users/{alice.pk}/", {"username": "Alice"})

    assert response.status_code == 200, response.content
    alice.refresh_from_db()
    assert alice.username == "Alice"


# -- unique regardless of case: the API ---------------------------------------------------------


@pytest.mark.parametrize("name", ["alice", "Alice", "ALICE"])
def test_the_api_refuses_a_new_user_named_like_another_in_any_case(
    name, alice, admin_user, client_for
):
    before = usernames()

    response = client_for(admin_user).post(
        "/api/users/", {"username": name, "password": NEW_PASSWORD}
    )

    assert response.status_code == 400
    assert response.json() == {"username": [TAKEN]}
    assert usernames() == before


def test_the_api_refuses_renaming_a_user_to_another_users_name_in_another_case(
    alice, bob, admin_user, client_for
):
    response = client_for(admin_user).patch(f"/api/users/{bob.pk}/", {"username": "ALICE"})

    assert response.status_code == 400
    assert response.json() == {"username": [TAKEN]}
    bob.refresh_from_db()
    assert bob.username == "bob"


def test_the_api_still_checks_the_username_characters(admin_user, client_for):
    response = client_for(admin_user).post(
        "/api/users/", {"username": "a b", "password": NEW_PASSWORD}
    )

    assert response.status_code == 400
    assert response.json()["username"] == [
        "Enter a valid username. This value may contain only letters, numbers, and @/./+/-/_ "
        "characters."
    ]


# -- unique regardless of case: the database and the commands -----------------------------------


def test_the_database_refuses_two_usernames_differing_only_in_case(alice, bob):
    # update() bypasses every check in Python: only the unique index on lower(username) is left.
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.filter(pk=bob.pk).update(username="ALICE")

    bob.refresh_from_db()
    assert bob.username == "bob"


def test_saving_a_user_named_like_another_is_a_validation_error(alice):
    with pytest.raises(ValidationError) as refused:
        User.objects.create_user("Alice", password=PASSWORD)

    assert refused.value.message_dict == {"username": [TAKEN]}
    assert usernames() == ["alice"]


def test_createsuperuser_refuses_a_username_differing_only_in_case(alice, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", NEW_PASSWORD)

    with pytest.raises(CommandError) as refused:
        call_command("createsuperuser", "--noinput", username="ALICE", email="a@example.org")

    assert str(refused.value) == TAKEN
    assert usernames() == ["alice"]


def test_the_demo_admin_is_not_made_again_in_another_case(make_user):
    make_user("Admin")

    out = StringIO()
    call_command("demo_admin", stdout=out)

    assert "The administrator 'Admin' exists already" in out.getvalue()
    assert "password:" not in out.getvalue()
    assert usernames() == ["Admin"]


# -- the admin console --------------------------------------------------------------------------


def change_form(user, **changes) -> dict:
    """What the admin's change form of ``user`` posts, with ``changes``."""
    data = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        **{flag: "on" for flag in ("is_active", "is_staff", "is_superuser") if getattr(user, flag)},
    }
    return {**data, **changes}


def change_url(user) -> str:
    return reverse("admin:auth_user_change", args=[user.pk])


def form_errors(response) -> dict:
    return response.context["adminform"].form.errors


def test_the_admin_add_form_refuses_a_username_differing_only_in_case(alice, admin_user):
    response = console(admin_user).post(
        reverse("admin:auth_user_add"),
        {
            "username": "ALICE",
            "usable_password": "true",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )

    assert response.status_code == 200
    assert form_errors(response) == {"username": [TAKEN]}
    assert usernames() == ["alice", "root-admin"]


def test_the_admin_add_form_makes_a_user_with_a_free_name(alice, admin_user):
    response = console(admin_user).post(
        reverse("admin:auth_user_add"),
        {
            "username": "carol",
            "usable_password": "true",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )

    assert response.status_code == 302
    assert usernames() == ["alice", "carol", "root-admin"]


def test_the_admin_change_form_refuses_a_username_differing_only_in_case(alice, bob, admin_user):
    response = console(admin_user).post(change_url(bob), change_form(bob, username="Alice"))

    assert response.status_code == 200
    assert form_errors(response) == {"username": [TAKEN]}
    bob.refresh_from_db()
    assert bob.username == "bob"


def test_an_admin_renames_a_user_in_the_console(bob, admin_user):
    response = console(admin_user).post(change_url(bob), change_form(bob, username="robert"))

    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.username == "robert"


def test_a_staff_user_cannot_open_or_post_their_own_change_form(make_user):
    staff = make_user("staffer", is_staff=True)
    client = console(staff)

    assert client.get(change_url(staff)).status_code == 403
    response = client.post(change_url(staff), change_form(staff, username="boss"))

    assert response.status_code == 403
    staff.refresh_from_db()
    assert staff.username == "staffer"


def test_a_superuser_role_on_a_cluster_does_not_open_the_users_screen(
    make_user, grant, make_cluster
):
    staff = make_user("cluster-boss", is_staff=True)
    grant(staff, "SuperUser", make_cluster())
    client = console(staff)

    assert client.get(reverse("admin:auth_user_changelist")).status_code == 403
    response = client.post(
        change_url(staff), change_form(staff, username="boss", is_superuser="on")
    )

    assert response.status_code == 403
    staff.refresh_from_db()
    assert (staff.username, staff.is_superuser) == ("cluster-boss", False)


def test_a_system_wide_superuser_role_renames_users_in_the_console(bob, make_user, grant):
    staff = make_user("system-boss", is_staff=True)
    grant(staff, "SuperUser")

    response = console(staff).post(change_url(bob), change_form(bob, username="robert"))

    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.username == "robert"
