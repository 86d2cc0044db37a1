"""The access log: one line per request on ``corral.access`` (client, user, method, path, status,
milliseconds), secrets in query strings never written."""

import logging
import re

import pytest
import requests

from project import events
from project.access.tokens import issue as issue_token


@pytest.fixture
def access_lines(caplog):
    caplog.set_level(logging.INFO, logger="corral.access")

    def lines() -> list[str]:
        return [record.getMessage() for record in caplog.records if record.name == "corral.access"]

    return lines


def test_a_request_is_logged_once_with_its_user_method_path_status_and_time(
    client, make_user, access_lines
):
    client.force_login(make_user("alice"))

    response = client.get("/api/me/?format=json")

    assert response.status_code == 200
    (line,) = access_lines()
    assert re.fullmatch(r"127\.0\.0\.1 alice GET /api/me/\?format=json 200 \d+ms", line), line


def test_an_anonymous_refused_request_is_logged_with_its_status(client, db, access_lines):
    client.get("/api/vms/")

    (line,) = access_lines()
    assert re.fullmatch(r"127\.0\.0\.1 - GET /api/vms/ 401 \d+ms", line), line


def test_a_console_ticket_in_the_query_string_is_not_logged(client, db, access_lines, caplog):
    client.get("/console/?token=s3cret-ticket-value")

    (line,) = access_lines()
    assert re.fullmatch(r"127\.0\.0\.1 - GET /console/\?token=\*\*\* 404 \d+ms", line), line
    assert "s3cret-ticket-value" not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_the_production_web_tier_logs_each_request_once_live_ones_answered_directly_too(
    asgi_server, make_user
):
    server = asgi_server()
    user = make_user("poller")
    token = issue_token(user)[1]
    since = events.latest_token()

    for _ in range(3):  # the first through Django, the others from the process's event hub
        poll = requests.get(
            f"{server.url}/api/events/",
            params={"since": since, "timeout": 0},
            headers={"Authorization": f"Token {token}"},
            timeout=30,
        )
        assert poll.status_code == 200
    refused = requests.get(f"{server.url}/console/", params={"token": "s3cret-ticket"}, timeout=30)

    assert refused.status_code == 404
    logged = [line for line in server.log().splitlines() if " corral.access " in line]
    lines = [line for line in logged if " /api/me/ " not in line]  # the start's readiness probe
    polls = [line for line in lines if f"GET /api/events/?since={since}&timeout=0 200" in line]
    assert len(polls) == 3, lines
    assert all(" poller GET " in line for line in polls), polls
    assert [line for line in lines if "GET /console/?token=*** 404" in line] != [], lines
    assert "s3cret-ticket" not in server.log()
    assert len(lines) == 4, lines


def test_logging_a_request_never_looks_its_user_up(
    client, make_user, access_lines, django_assert_num_queries
):
    client.force_login(make_user("browsing"))

    with django_assert_num_queries(0):
        icon = client.get("/favicon.ico")

    assert icon.status_code == 302
    (line,) = access_lines()
    assert re.fullmatch(r"127\.0\.0\.1 - GET /favicon\.ico 302 \d+ms", line), line


def test_a_static_file_served_is_not_an_info_line_but_one_missing_is(client, db, caplog, settings):
    settings.WHITENOISE_USE_FINDERS = True  # as under DEBUG: the apps' files, uncollected
    caplog.set_level(logging.DEBUG, logger="corral.access")

    served = client.get("/static/corral/portal.css")
    missing = client.get("/static/corral/no-such.css")

    levels = {
        record.getMessage().split()[3]: record.levelname
        for record in caplog.records
        if record.name == "corral.access"
    }
    assert (served.status_code, missing.status_code) == (200, 404)
    assert levels == {"/static/corral/portal.css": "DEBUG", "/static/corral/no-such.css": "INFO"}
