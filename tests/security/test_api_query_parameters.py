"""Query parameters: every operation takes exactly those its schema documents (and
``format``); pagination and ordering values out of range are refused, never replaced by a
default.

The lists, their parameters and the accepted orderings are read from the served schema, so
these checks also hold the schema to what the API does.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.conftest import stored_rows
from tests.security.conftest import World
from tests.security.operations import concrete, served_schema

BAD_LIMITS = ["abc", "-1", "0", "1001", "1.5", "1e3", " 5", "9" * 40]
BAD_OFFSETS = ["-5", "abc", "1.5", "+5", "9" * 40]
LIMIT = "Rows per page: a whole number from 1 to 1000."
OFFSET = "Rows to skip: a whole number, 0 or more."


@pytest.fixture
def api(admin_user, client_for):
    return client_for(admin_user)


@pytest.fixture
def schema(db):
    return served_schema()


def query_parameters(operation: dict) -> dict[str, dict]:
    return {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}


def lists(schema: dict) -> list[tuple[str, dict]]:
    """(path, operation) of every paginated list."""
    return [
        (path, item["get"])
        for path, item in schema["paths"].items()
        if "get" in item and "limit" in query_parameters(item["get"])
    ]


def json_error(response) -> dict:
    assert response["Content-Type"] == "application/json", response.content[:300]
    body = response.json()
    assert isinstance(body, dict) and body, body
    return body


def refusals(api, world: World, schema: dict, query: dict, expected: dict) -> list[str]:
    """Each list asked with ``query``: what did not answer 400 with ``expected``."""
    wrong = []
    for path, _ in lists(schema):
        url = concrete(path, world)
        response = api.get(url, query)
        if response.status_code != 400 or json_error(response) != expected:
            wrong.append(f"GET {url} {query}: {response.status_code} {response.content[:300]}")
    return wrong


def test_every_list_is_paginated_and_documents_it(schema):
    paths = {path for path, _ in lists(schema)}

    assert len(paths) >= 15
    for path, operation in lists(schema):
        parameters = query_parameters(operation)
        assert parameters["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000}
        assert parameters["offset"]["schema"] == {"type": "integer", "minimum": 0}, path


@pytest.mark.parametrize("value", BAD_LIMITS)
def test_a_bad_limit_is_refused_by_every_list(world, api, schema, value):
    assert refusals(api, world, schema, {"limit": value}, {"limit": [LIMIT]}) == []


@pytest.mark.parametrize("value", BAD_OFFSETS)
def test_a_bad_offset_is_refused_by_every_list(world, api, schema, value):
    assert refusals(api, world, schema, {"offset": value}, {"offset": [OFFSET]}) == []


def test_an_empty_limit_or_offset_is_not_given(world, api):
    response = api.get("/api/clusters/", {"limit": "", "offset": ""})

    assert response.status_code == 200
    assert response.json()["count"] == 1


def test_an_offset_beyond_the_list_is_an_empty_page(world, api):
    response = api.get("/api/clusters/", {"offset": "9" * 18})

    assert response.status_code == 200
    assert response.json()["results"] == []


@pytest.mark.parametrize("value", ["nope", "-password", "name,", "name,-nope", "-", "name__len"])
def test_an_unknown_ordering_is_refused_by_every_ordered_list(world, api, schema, value):
    wrong = []
    for path, operation in lists(schema):
        if "ordering" not in query_parameters(operation):
            continue
        url = concrete(path, world)
        response = api.get(url, {"ordering": value})
        body = json_error(response) if response.status_code == 400 else {}
        if list(body) != ["ordering"] or "Cannot order by" not in body["ordering"][0]:
            wrong.append(f"GET {url}: {response.status_code} {response.content[:300]}")
    assert wrong == []


def test_every_documented_ordering_is_accepted(world, api, schema):
    wrong, tried = [], 0
    for path, operation in lists(schema):
        ordering = query_parameters(operation).get("ordering")
        if ordering is None:
            continue
        url = concrete(path, world)
        for value in ordering["schema"]["items"]["enum"]:
            tried += 1
            response = api.get(url, {"ordering": value})
            if response.status_code != 200:
                wrong.append(f"GET {url}?ordering={value}: {response.status_code}")
    assert wrong == []
    assert tried > 60


def test_the_ordering_fields_are_applied(world, api, make_cluster):
    make_cluster("aaa")
    make_cluster("zzz")

    response = api.get("/api/clusters/", {"ordering": "-name"})

    names = [row["name"] for row in response.json()["results"]]
    assert names == sorted(names, reverse=True) and names[0] == "zzz"


# -- unknown parameters --------------------------------------------------------------------


def test_a_parameter_no_operation_documents_is_refused_everywhere(world, api, schema):
    """Every operation, list or not, reading or writing: ``page`` and ``nope`` are no
    parameter of any, so each answers 400 naming both, and nothing changes."""
    before = stored_rows()
    wrong = []
    for path, item in schema["paths"].items():
        for method in item:
            url = f"{concrete(path, world)}?page=2&nope=1"
            response = api.generic(method.upper(), url, "{}", content_type="application/json")
            body = json_error(response) if response.status_code == 400 else {}
            if sorted(body) != ["nope", "page"] or "it takes:" not in body["page"][0]:
                wrong.append(f"{method.upper()} {url}: {response.status_code} {body}")
    assert wrong == []
    assert stored_rows() == before


def test_the_refusal_says_what_the_list_takes(world, api):
    response = api.get("/api/clusters/", {"page": "2"})

    assert response.status_code == 400
    assert json_error(response) == {
        "page": [
            "Not a parameter of this operation; it takes: format, limit, name, "
            "name__icontains, offset, ordering, q."
        ]
    }


def test_a_filter_of_a_list_is_no_parameter_of_an_object(world, api):
    """DRF would apply a list's filters to a single object too (a 404 when it does not
    match); the schema documents them for the list only, and so does the API."""
    response = api.get(f"/api/vms/{world.vm.pk}/", {"status": "up"})

    assert response.status_code == 400
    assert json_error(response) == {
        "status": ["Not a parameter of this operation; it takes: format."]
    }


def _empty(parameter: dict) -> list[str]:
    """A parameter given with no value (a repeated one, a choice list, with its first choice:
    an empty item would be an invalid choice)."""
    schema = parameter["schema"]
    if schema.get("type") == "array" and parameter.get("explode", True):
        return schema["items"]["enum"][:1]
    return [""]


def test_every_documented_parameter_of_every_list_is_taken(world, api, schema):
    """All at once and empty (an empty value means "not given"): each list (and the event
    feed) answers 200, so no documented parameter is refused."""
    wrong = []
    for path, item in schema["paths"].items():
        parameters = query_parameters(item.get("get", {}))
        if not parameters:
            continue
        query = {name: _empty(parameter) for name, parameter in parameters.items()}
        url = concrete(path, world)
        response = api.get(url, query)
        if response.status_code != 200:
            wrong.append(f"GET {url} {sorted(query)}: {response.status_code} {response.content}")
    assert wrong == []


def test_search_is_a_parameter_only_of_lists_that_search(world, api, schema):
    searching = {path for path, op in lists(schema) if "q" in query_parameters(op)}

    assert "/api/clusters/" in searching
    assert "/api/jobs/" not in searching
    response = api.get("/api/jobs/", {"q": "start"})
    assert response.status_code == 400
    assert list(json_error(response)) == ["q"]


@pytest.mark.parametrize("value", ["json", "api"])
def test_format_is_taken_everywhere(world, api, value):
    response = api.get("/api/clusters/", {"format": value, "limit": "1"})

    assert response.status_code == 200
    expected = "application/json" if value == "json" else "text/html; charset=utf-8"
    assert response["Content-Type"] == expected


def test_the_event_feed_takes_its_token_and_wait(world, api):
    response = api.get("/api/events/", {"since": "0", "timeout": "0", "format": "json"})

    assert response.status_code == 200
    assert response.json()["events"]


def test_the_schema_and_its_documentation_take_their_own_parameters(world, api):
    assert api.get("/api/schema/", {"format": "json", "lang": "en"}).status_code == 200
    assert api.get("/api/docs/").status_code == 200


def test_too_many_parameters_are_a_json_400(world, api):
    with override_settings(DEBUG=True):
        response = api.get("/api/clusters/?" + "&".join(f"p{i}=1" for i in range(1001)))

    assert response.status_code == 400
    assert json_error(response) == {"detail": "Too many parameters or fields (at most 1000)."}
