"""The access log: one line per request on ``corral.access`` (client, user, method, path, status,
milliseconds), secrets in query strings never written."""

import logging
import re

import pytest


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
