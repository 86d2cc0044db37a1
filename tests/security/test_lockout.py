"""Log-in lockout of a username: after CORRAL_LOGIN_MAX_FAILURES failed log-ins for one
username from one address within CORRAL_LOGIN_LOCKOUT_MINUTES, the portal, the admin console and
the API's token endpoint all refuse that username from that address (429 with Retry-After),
even with the right password, until the failures leave the window. Limits per address, and the
client address behind proxies, are in test_login_addresses.py."""

from __future__ import annotations

import re

import pytest

from project.models import LoginFailure
from tests.conftest import unique
from tests.security.logins import (
    ENTRIES,
    ENTRY_IDS,
    LOCKED,
    PASSWORD,
    admin,
    age_failures,
    api,
    fail,
    logged_in,
    portal,
    refusal_message,
    refused_as_locked,
)


@pytest.fixture
def account(make_user):
    """A staff user, so that the admin console lets them in too."""
    return make_user(unique("locked"), is_staff=True)


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_five_failures_lock_the_account_even_for_the_right_password(account, entry):
    fail(entry, account.username, 5)

    response = entry(account.username, PASSWORD)

    assert refused_as_locked(response)
    assert not logged_in(response)


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_four_failures_do_not_lock_the_account(account, entry):
    fail(entry, account.username, 4)

    assert logged_in(entry(account.username, PASSWORD))


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_every_entry_point_answers_429_with_when_to_try_again(account, entry):
    fail(portal, account.username, 5)

    response = entry(account.username, PASSWORD)

    assert response.status_code == 429
    assert 890 <= int(response.headers["Retry-After"]) <= 900
    assert refusal_message(response) == f"{LOCKED} 15 minutes."


@pytest.mark.parametrize("entry", [portal, admin], ids=["portal", "admin"])
def test_the_log_in_pages_show_the_form_again_with_the_message(account, entry):
    fail(api, account.username, 5)

    page = entry(account.username, PASSWORD).content.decode()

    assert 'name="password"' in page
    assert f"{LOCKED} 15 minutes." in page


def test_the_api_says_when_to_try_again_in_json(account):
    fail(api, account.username, 5)

    response = api(account.username, PASSWORD)

    assert response.json() == {"detail": f"{LOCKED} 15 minutes."}


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
    assert refusal_message(portal(account.username, PASSWORD)) == f"{LOCKED} 5 minutes."
    age_failures(account.username, 4.5)
    assert refusal_message(portal(account.username, PASSWORD)) == f"{LOCKED} 1 minute."
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

    assert refusal_message(portal(account.username, PASSWORD)) == f"{LOCKED} 3 minutes."


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


def _autofocused(page: str) -> list[str]:
    """The names of the page's inputs that take the cursor when it opens."""
    inputs = re.findall(r"<input [^>]*>", page)
    return [re.search(r'name="(\w+)"', tag).group(1) for tag in inputs if " autofocus" in tag]


@pytest.mark.parametrize("entry", [portal, admin], ids=["portal", "admin"])
def test_after_a_wrong_password_the_cursor_waits_in_the_password_field(account, entry):
    page = entry(account.username, "not-the-password").content.decode()

    assert _autofocused(page) == ["password"]
    assert f'value="{account.username}"' in page
