"""Log-in throttling by client address: one address cannot try many usernames
(CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS), a username is locked only for the addresses that failed
for it, and behind a proxy named in CORRAL_TRUSTED_PROXIES the client is the rightmost
X-Forwarded-For address that is not a trusted proxy; from anyone else the header is ignored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F
from django.test import RequestFactory

from project.models import LoginFailure
from project.web.client_address import client_address
from tests.conftest import unique
from tests.security.logins import (
    ADDRESS_LOCKED,
    ENTRIES,
    ENTRY_IDS,
    LOCKED,
    PASSWORD,
    api,
    fail,
    logged_in,
    portal,
    refusal_message,
    refused_as_address_locked,
    refused_as_locked,
    refused_as_wrong,
)

ATTACKER = "203.0.113.66"
OFFICE = "198.51.100.10"
PROXY = "10.0.0.2"


@pytest.fixture
def the_admin(make_user):
    """A staff superuser, who may log in at all three entry points."""
    return make_user(unique("boss"), superuser=True)


def recorded_addresses() -> set[str]:
    return set(LoginFailure.objects.values_list("address", flat=True))


# -- one address, many usernames ----------------------------------------------------------------


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_thirty_usernames_from_one_address_get_429_after_the_twentieth(entry, db):
    answers = [entry(f"guess-{n}", "wrong-password", ATTACKER) for n in range(30)]

    assert all(refused_as_wrong(answer) for answer in answers[:20])
    assert all(refused_as_address_locked(answer) for answer in answers[20:])
    assert refusal_message(answers[20]) == f"{ADDRESS_LOCKED} 15 minutes."
    assert LoginFailure.objects.count() == 20


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_a_locked_address_is_refused_even_with_a_right_password(entry, the_admin):
    for n in range(20):
        api(f"guess-{n}", "wrong-password", ATTACKER)

    response = entry(the_admin.username, PASSWORD, ATTACKER)

    assert refused_as_address_locked(response)
    assert not logged_in(response)


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_a_locked_address_does_not_stop_other_addresses(entry, the_admin):
    for n in range(25):
        api(f"guess-{n}", "wrong-password", ATTACKER)

    assert logged_in(entry(the_admin.username, PASSWORD, OFFICE))


def test_the_address_limit_comes_from_the_settings(settings, db):
    settings.CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS = 3
    for n in range(3):
        assert refused_as_wrong(api(f"guess-{n}", "wrong-password", ATTACKER))

    assert refused_as_address_locked(api("guess-3", "wrong-password", ATTACKER))


def test_an_address_limit_of_zero_turns_it_off(settings, db):
    settings.CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS = 0

    answers = [api(f"guess-{n}", "wrong-password", ATTACKER) for n in range(30)]

    assert all(refused_as_wrong(answer) for answer in answers)


def test_logging_in_to_ones_own_account_does_not_reset_the_address_count(make_user, db):
    eve = make_user(unique("eve"))
    for n in range(19):
        api(f"guess-{n}", "wrong-password", ATTACKER)
    assert logged_in(api(eve.username, PASSWORD, ATTACKER))

    assert refused_as_wrong(api("guess-19", "wrong-password", ATTACKER))
    assert refused_as_address_locked(api("guess-20", "wrong-password", ATTACKER))


def test_the_address_lock_lifts_when_its_failures_leave_the_window(the_admin):
    for n in range(20):
        api(f"guess-{n}", "wrong-password", ATTACKER)
    LoginFailure.objects.update(at=F("at") - timedelta(minutes=15.1))

    assert logged_in(api(the_admin.username, PASSWORD, ATTACKER))


def test_an_ipv6_client_is_counted_by_its_64_network(the_admin):
    for n in range(20):
        api(f"guess-{n}", "wrong-password", f"2001:db8:1:2::{n + 1:x}")

    assert refused_as_address_locked(api(the_admin.username, PASSWORD, "2001:db8:1:2::ffff"))
    assert logged_in(api(the_admin.username, PASSWORD, "2001:db8:1:3::1"))
    assert recorded_addresses() == {"2001:db8:1:2::/64"}


# -- a username is locked only where it failed ----------------------------------------------------


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_a_dozen_failures_for_the_admin_elsewhere_do_not_stop_the_admin(entry, the_admin):
    answers = [api(the_admin.username, "wrong-password", ATTACKER) for _ in range(12)]

    assert all(refused_as_wrong(answer) for answer in answers[:5])
    assert all(refused_as_locked(answer) for answer in answers[5:])
    assert logged_in(entry(the_admin.username, PASSWORD, OFFICE))


def test_the_address_that_failed_stays_locked_out_of_that_username(the_admin):
    fail(api, the_admin.username, 5, ATTACKER)
    assert logged_in(api(the_admin.username, PASSWORD, OFFICE))

    response = api(the_admin.username, PASSWORD, ATTACKER)

    assert refusal_message(response) == f"{LOCKED} 15 minutes."


def test_failures_from_the_users_own_address_still_lock_it_there(the_admin):
    fail(portal, the_admin.username, 5, OFFICE)

    assert refused_as_locked(portal(the_admin.username, PASSWORD, OFFICE))
    assert logged_in(portal(the_admin.username, PASSWORD, ATTACKER))


# -- the client address behind proxies -----------------------------------------------------------


def test_x_forwarded_for_from_an_untrusted_client_is_ignored(the_admin, settings):
    settings.CORRAL_TRUSTED_PROXIES = [PROXY]
    # Each attempt claims to come from somewhere else; all are counted under the sender.
    answers = [
        api(f"guess-{n}", "wrong-password", ATTACKER, forwarded=f"192.0.2.{n}") for n in range(21)
    ]

    assert all(refused_as_wrong(answer) for answer in answers[:20])
    assert refused_as_address_locked(answers[20])
    assert recorded_addresses() == {ATTACKER}


def test_x_forwarded_for_is_ignored_when_no_proxy_is_trusted(the_admin):
    fail(api, the_admin.username, 5, ATTACKER, forwarded=OFFICE)

    assert refused_as_locked(api(the_admin.username, PASSWORD, ATTACKER, forwarded=OFFICE))
    assert recorded_addresses() == {ATTACKER}


@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_behind_a_trusted_proxy_the_forwarded_client_is_counted(entry, the_admin, settings):
    settings.CORRAL_TRUSTED_PROXIES = ["10.0.0.0/24"]
    fail(entry, the_admin.username, 5, PROXY, forwarded=ATTACKER)

    assert refused_as_locked(entry(the_admin.username, PASSWORD, PROXY, forwarded=ATTACKER))
    assert logged_in(entry(the_admin.username, PASSWORD, PROXY, forwarded=OFFICE))
    assert recorded_addresses() == {ATTACKER}


def test_addresses_a_client_puts_left_of_the_proxys_entry_are_ignored(the_admin, settings):
    settings.CORRAL_TRUSTED_PROXIES = [PROXY]
    for n in range(20):
        # What nginx sends on when the client sent "X-Forwarded-For: 192.0.2.n" itself.
        api(f"guess-{n}", "wrong-password", PROXY, forwarded=f"192.0.2.{n}, {ATTACKER}")

    response = api(the_admin.username, PASSWORD, PROXY, forwarded=f"{OFFICE}, {ATTACKER}")

    assert refused_as_address_locked(response)
    assert recorded_addresses() == {ATTACKER}


def test_the_client_is_the_rightmost_address_that_is_not_a_trusted_proxy(settings):
    settings.CORRAL_TRUSTED_PROXIES = ["10.0.0.0/24", "2001:db8:ffff::/48"]
    request = RequestFactory().get(
        "/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=f"192.0.2.1, {ATTACKER}, 2001:db8:ffff::7"
    )

    assert str(client_address(request)) == ATTACKER


def test_a_chain_of_trusted_proxies_only_gives_the_farthest_of_them(settings):
    settings.CORRAL_TRUSTED_PROXIES = ["10.0.0.0/24"]
    request = RequestFactory().get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="10.0.0.7,10.0.0.8")

    assert str(client_address(request)) == "10.0.0.7"


@pytest.mark.parametrize(
    "entry, client",
    [
        ("203.0.113.66:51234", ATTACKER),
        ("[2001:db8::66]:51234", "2001:db8::66"),
        ("[2001:db8::66]", "2001:db8::66"),
        (" ::ffff:203.0.113.66 ", ATTACKER),
    ],
    ids=["ipv4-with-port", "ipv6-with-port", "ipv6-in-brackets", "ipv4-mapped"],
)
def test_forwarded_addresses_with_ports_or_brackets_are_read(entry, client, settings):
    settings.CORRAL_TRUSTED_PROXIES = [PROXY]
    request = RequestFactory().get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=entry)

    assert str(client_address(request)) == client


MALFORMED = {
    "empty": "",
    "a word": "unknown",
    "commas only": ",,,",
    "trailing comma": f"{ATTACKER},",
    "bad octet": "999.1.1.1",
    "open bracket": "[2001:db8::1",
    "bad port": "203.0.113.66:http",
    "text after the bracket": "[2001:db8::1]x",
    "markup": "<script>alert(1)</script>",
    "not ascii": "ä.ö.ü.ß",
    "null": "203.0.113.66\x00",
    "very long": ", ".join(f"198.51.100.{n % 250}" for n in range(2000)) + ", x",
}


@pytest.mark.parametrize("header", MALFORMED.values(), ids=MALFORMED.keys())
@pytest.mark.parametrize("entry", ENTRIES, ids=ENTRY_IDS)
def test_a_malformed_x_forwarded_for_counts_under_the_proxy_never_a_500(
    entry, header, settings, db
):
    settings.CORRAL_TRUSTED_PROXIES = [PROXY]

    response = entry("nobody-here", "wrong-password", PROXY, forwarded=header)

    assert refused_as_wrong(response)
    assert recorded_addresses() == {PROXY}


def test_a_client_cannot_pick_its_address_with_a_malformed_entry(settings, db):
    settings.CORRAL_TRUSTED_PROXIES = [PROXY]
    request = RequestFactory().get(
        "/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=f"{OFFICE}, garbage, {PROXY}"
    )

    assert str(client_address(request)) == PROXY


def test_a_missing_remote_address_is_counted_as_one_unknown_address(db):
    for n in range(20):
        assert refused_as_wrong(api(f"guess-{n}", "wrong-password", ""))

    assert refused_as_address_locked(api("guess-20", "wrong-password", ""))
    assert recorded_addresses() == {""}
