"""Log-in lockout: after CORRAL_LOGIN_MAX_FAILURES failed log-ins for one username within
CORRAL_LOGIN_LOCKOUT_MINUTES, the portal, the admin console and the API's token endpoint all
refuse that username, even with the right password, until the failures leave the window."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from rest_framework.test import APIClient

from project.models import LoginFailure
from tests.conftest import unique

PASSWORD = "pw-Corral-1"  # what make_user gives everyone
LOCKED = "Too many failed log-ins for this account; try again in"


@pytest.fixture
def account(make_user):
    """A staff user, so that the admin console lets them in too."""
    return make_user(unique("locked"), is_staff=True)


def portal(username: str, password: str):
    return Client().post("/login/", {"username": username, "password": password})


def admin(username: str, password: str):
    return Client().post("/admin/login/", {"username": username, "password": password})


def api(username: str, password: str):
    body = {"username": username, "password": password}
    return APIClient().post("/api/auth/token/", body, format="json")


def logged_in(response) -> bool:
    """Whether a log-in attempt at any of the three entry points let the user in."""
    if response.wsgi_request.path == "/api/auth/token/":
        return response.status_code == 200 and "token" in response.json()
    return response.status_code == 302 and "_auth_user_id" in response.wsgi_request.session


def refused_as_locked(response) -> bool:
    if response.wsgi_request.path == "/api/auth/token/":
        return response.status_code == 429 and response.json()["detail"].startswith(LOCKED)
    return response.status_code == 200 and LOCKED in response.content.decode()


def fail(entry, username: str, times: int) -> None:
    for _ in range(times):
        response = entry(username, "wrong-password")
        assert not logged_in(response)
        assert not refused_as_locked(response)


def age_failures(username: str, minutes: float) -> None:
    """Move the recorded failures of ``username`` that many minutes into the past."""
    for failure in LoginFailure.objects.filter(username=username.lower()):
        failure.at -= timedelta(minutes=minutes)
        failure.save(update_fields=["at"])


@pytest.mark.parametrize("entry", [portal, admin, api], ids=["portal", "admin", "api"])
def test_five_failures_lock_the_account_even_for_the_right_password(account, entry):
    fail(entry, account.username, 5)

    response = entry(account.username, PASSWORD)

    assert refused_as_locked(response)
    assert not logged_in(response)


@pytest.mark.parametrize("entry", [portal, admin, api], ids=["portal", "admin", "api"])
def test_four_failures_do_not_lock_the_account(account, entry):
    fail(entry, account.username, 4)

    assert logged_in(entry(account.username, PASSWORD))


def test_the_portal_and_the_admin_say_when_to_try_again(account):
    fail(portal, account.username, 5)

    for entry in (portal, admin):
        page = entry(account.username, PASSWORD).content.decode()

        assert f"{LOCKED} 15 minutes." in page


def test_the_api_answers_429_with_a_retry_after(account):
    fail(api, account.username, 5)

    response = api(account.username, PASSWORD)

    assert response.status_code == 429
    assert response.json() == {"detail": f"{LOCKED} 15 minutes."}
    assert 890 <= int(response.headers["Retry-After"]) <= 900


def test_failures_count_across_the_three_entry_points(account):
    fail(portal, account.username, 2)
    fail(admin, account.username, 2)
    fail(api, account.username, 1)

    assert refused_as_locked(portal(account.username, PASSWORD))
    assert refused_as_locked(admin(account.username, PASSWORD))
    assert refused_as_locked(api(account.username, PASSWORD))


def test_other_usernames_are_not_affected(account, make_user):
    other = make_user(unique("bystander"))
    fail(portal, account.username, 5)

    assert logged_in(portal(other.username, PASSWORD))
    assert logged_in(api(other.username, PASSWORD))


def test_the_username_is_counted_whatever_its_case(account):
    fail(portal, account.username.upper(), 5)

    assert refused_as_locked(portal(account.username, PASSWORD))


def test_attempts_while_locked_are_not_counted(account):
    fail(portal, account.username, 5)
    for _ in range(3):
        assert refused_as_locked(portal(account.username, "wrong-password"))

    assert LoginFailure.objects.filter(username=account.username.lower()).count() == 5


def test_the_lock_counts_down_then_lifts_when_the_window_has_passed(account):
    fail(api, account.username, 5)

    age_failures(account.username, 10)
    assert f"{LOCKED} 5 minutes." in portal(account.username, PASSWORD).content.decode()
    age_failures(account.username, 4.5)
    assert f"{LOCKED} 1 minute." in portal(account.username, PASSWORD).content.decode()
    age_failures(account.username, 0.6)

    assert logged_in(portal(account.username, PASSWORD))


def test_the_lock_lasts_while_enough_failures_stay_in_the_window(account):
    fail(portal, account.username, 4)
    age_failures(account.username, 14)
    fail(portal, account.username, 1)
    assert refused_as_locked(portal(account.username, PASSWORD))

    # The four old failures leave the window; the recent one alone does not lock.
    age_failures(account.username, 1.1)

    assert logged_in(portal(account.username, PASSWORD))


def test_a_successful_login_clears_the_count(account):
    fail(portal, account.username, 4)
    assert logged_in(api(account.username, PASSWORD))

    fail(admin, account.username, 4)

    assert logged_in(admin(account.username, PASSWORD))
    assert not LoginFailure.objects.filter(username=account.username.lower()).exists()


def test_the_limit_and_the_window_come_from_the_settings(account, settings):
    settings.CORRAL_LOGIN_MAX_FAILURES = 2
    settings.CORRAL_LOGIN_LOCKOUT_MINUTES = 3
    fail(portal, account.username, 2)

    assert f"{LOCKED} 3 minutes." in portal(account.username, PASSWORD).content.decode()


def test_a_limit_of_zero_turns_the_lockout_off(account, settings):
    settings.CORRAL_LOGIN_MAX_FAILURES = 0
    fail(portal, account.username, 8)

    assert logged_in(portal(account.username, PASSWORD))


def test_failures_for_unknown_usernames_are_counted_and_expire(db):
    for _ in range(5):
        assert api("nobody-here", "guess").status_code == 400
    assert api("nobody-here", "guess").status_code == 429

    age_failures("nobody-here", 16)
    api("someone-else", "guess")  # recording a failure clears the expired ones

    assert not LoginFailure.objects.filter(username="nobody-here").exists()
