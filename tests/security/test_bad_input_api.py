"""The API under bad JSON bodies: times with offsets PostgreSQL refuses, lone surrogates,
nesting thousands of levels deep, lists and objects where a property takes one value, bodies
over the size limit.

Each refusal is a 4xx whose body is a JSON object, with the field at fault named when there is
one, and leaves every table as it was; what can be accepted (a time with any offset Python
reads) is stored in UTC. Operations are taken from the served schema, so a new endpoint is
covered without being listed here.
"""

from __future__ import annotations

import json
from datetime import UTC, timedelta, timezone

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone as django_timezone

from hosts.models import Cluster
from leases.models import Lease
from project.json_input import MAX_DEPTH
from tests.conftest import stored_rows
from tests.security.conftest import World
from tests.security.operations import concrete, served_schema

SURROGATE = "Surrogate characters are not allowed: U+D800."
TOO_DEEP = f"Nested deeper than {MAX_DEPTH} levels."
WRITE_METHODS = ("post", "put", "patch")


@pytest.fixture
def api(admin_user, client_for):
    return client_for(admin_user)


def send(api, method: str, url: str, text: str):
    return api.generic(method.upper(), url, text, content_type="application/json")


def json_error(response) -> dict:
    assert response["Content-Type"] == "application/json", response.content[:300]
    body = response.json()
    assert isinstance(body, dict) and body, body
    return body


def instances(**extra) -> dict:
    return {"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 128, "amount": 1, **extra}


def lease_body(start, end, **extra) -> dict:
    return {
        "name": "offsets",
        "start_date": start,
        "end_date": end,
        "reservations": [instances()],
        **extra,
    }


# -- times with offsets beyond ±15:59 ------------------------------------------------------


EAST = timezone(timedelta(hours=23))
WEST = timezone(-timedelta(hours=23, minutes=59))


def in_zone(moment, zone) -> str:
    return moment.astimezone(zone).isoformat()


@pytest.fixture
def window():
    """A two-hour window two days ahead, to the second."""
    start = (django_timezone.now() + timedelta(days=2)).replace(microsecond=0)
    return start, start + timedelta(hours=2)


@pytest.mark.parametrize("zone", [EAST, WEST], ids=["+23:00", "-23:59"])
def test_a_lease_created_with_any_offset_is_stored_in_utc(world, api, window, zone):
    start, end = window

    response = api.post(
        "/api/leases/", lease_body(in_zone(start, zone), in_zone(end, zone)), format="json"
    )

    assert response.status_code == 201, response.json()
    lease = Lease.objects.get(pk=response.json()["id"])
    assert (lease.start_date, lease.end_date) == (start, end)
    assert response.json()["start_date"] == start.astimezone(UTC).isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize("zone", [EAST, WEST], ids=["+23:00", "-23:59"])
def test_the_capacity_check_reads_any_offset(world, api, window, zone):
    start, end = window
    before = stored_rows()

    response = api.post(
        "/api/leases/check/", lease_body(in_zone(start, zone), in_zone(end, zone)), format="json"
    )

    assert response.status_code == 200, response.json()
    assert response.json() == {"fits": True, "message": "Fits."}
    assert stored_rows() == before


@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_lease_moved_with_any_offset_is_stored_in_utc(world, api, method):
    lease = world.lease
    new_end = lease.end_date + timedelta(hours=1)

    response = getattr(api, method)(
        f"/api/leases/{lease.pk}/", {"end_date": in_zone(new_end, EAST)}, format="json"
    )

    assert response.status_code == 200, response.json()
    lease.refresh_from_db()
    assert lease.end_date == new_end


def test_a_time_before_the_year_one_in_utc_is_a_field_error(world, api, window):
    before = stored_rows()

    response = api.post(
        "/api/leases/check/",
        lease_body("0001-01-01T00:00:00+23:00", window[1].isoformat()),
        format="json",
    )

    assert response.status_code == 400
    assert json_error(response) == {
        "start_date": ["No such time: it falls before the year 1 in UTC."]
    }
    assert stored_rows() == before


# -- lone surrogates -----------------------------------------------------------------------


def _resolve(schema: dict, node: dict) -> dict:
    """The object schema behind references (an ``allOf`` beside ``properties`` states
    constraints, such as a lease's start or start_date; it is not a reference)."""
    while "$ref" in node or ("allOf" in node and "properties" not in node):
        node = node["allOf"][0] if "allOf" in node and "properties" not in node else node
        if "$ref" in node:
            node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def text_fields(schema: dict) -> list[tuple[str, str, str]]:
    """(method, path, field) for every text or choice field of every JSON request body."""
    found = []
    for path, item in schema["paths"].items():
        for method in WRITE_METHODS:
            content = item.get(method, {}).get("requestBody", {}).get("content", {})
            if "application/json" not in content:
                continue
            body = _resolve(schema, content["application/json"]["schema"])
            for field, spec in body.get("properties", {}).items():
                spec = _resolve(schema, spec)
                if spec.get("readOnly"):
                    continue
                if spec.get("type") == "string" or "enum" in spec:
                    found.append((method, path, field))
    return found


def test_a_lone_surrogate_in_any_text_or_choice_field_is_a_field_error(world: World, api):
    fields = text_fields(served_schema())
    # Names, descriptions and choices of every writable kind of object, and the token form.
    assert {path for _, path, _ in fields} >= {
        "/api/clusters/",
        "/api/hosts/",
        "/api/templates/",
        "/api/vms/",
        "/api/vmpools/",
        "/api/leases/",
        "/api/users/",
        "/api/groups/",
        "/api/roles/",
        "/api/permissions/",
        "/api/schedulingpolicies/",
        "/api/affinitygroups/",
        "/api/auth/token/",
    }
    assert len(fields) > 60
    before = stored_rows()
    wrong = []
    for method, path, field in fields:
        url = concrete(path, world)

        response = send(api, method, url, json.dumps({field: "name\ud800"}))

        if response.status_code != 400 or json_error(response) != {field: [SURROGATE]}:
            wrong.append(
                f"{method.upper()} {url} {field}: {response.status_code} {response.content}"
            )
    assert not wrong, "\n".join(wrong)
    assert stored_rows() == before


@pytest.mark.parametrize(
    "body,expected",
    [
        (
            {"name": "x", "reservations": [instances(resource_type="\ud800")]},
            {
                "reservations": [
                    "Surrogate characters are not allowed: U+D800 "
                    "(in reservations[0].resource_type)."
                ]
            },
        ),
        (
            {"name": "x", "reservations": [instances(resource_properties={"gpu": "\udfff"})]},
            {
                "reservations": [
                    "Surrogate characters are not allowed: U+DFFF "
                    "(in reservations[0].resource_properties.gpu)."
                ]
            },
        ),
        (
            {"name": "x", "reservations": [instances(resource_properties={"\ud800": "a100"})]},
            {
                "reservations": [
                    "Surrogate characters are not allowed: U+D800 "
                    "(in a name inside reservations[0].resource_properties)."
                ]
            },
        ),
        (
            {"\ud800": "x"},
            {"detail": f"JSON parse error - {SURROGATE[:-1]} (in a name)."},
        ),
    ],
    ids=["choice in a list", "property value", "property name", "field name"],
)
def test_a_lone_surrogate_deeper_in_a_body_names_where(world, api, body, expected):
    before = stored_rows()

    response = send(api, "post", "/api/leases/", json.dumps(body))

    assert response.status_code == 400
    assert json_error(response) == expected
    assert stored_rows() == before


def test_a_lone_surrogate_inside_a_blazar_expression_is_a_field_error(world, api, window):
    expression = json.dumps(["==", "$gpu", "\ud800"])  # the escape, as text inside the text
    body = lease_body(*(t.isoformat() for t in window))
    body["reservations"] = [instances(resource_properties=expression)]
    before = stored_rows()

    response = api.post("/api/leases/", body, format="json")

    assert response.status_code == 400
    assert json_error(response) == {
        "reservations": {
            "0": {"resource_properties": ["Surrogate characters are not allowed: U+D800 (in [2])."]}
        }
    }
    assert stored_rows() == before


@pytest.mark.parametrize(
    "query,expected",
    [
        ("status=%ED%A0%80", 400),
        ("ordering=%ED%A0%80", 400),
        ("q=%ED%A0%80", 200),
        ("name=%ED%A0%80", 200),
    ],
)
def test_a_surrogate_in_a_query_string_is_read_as_a_replacement_character(
    world, api, query, expected
):
    """Query strings are UTF-8: the bytes of an encoded surrogate are not, and Django reads
    them as U+FFFD, a character like any other (no VM has it in its name)."""
    response = api.get(f"/api/vms/?{query}")

    assert response.status_code == expected
    name = query.split("=")[0]
    if expected == 400:
        assert list(json_error(response)) == [name]
        assert "\ufffd" in response.json()[name][0]
    else:
        assert response.json()["count"] == 0


def test_a_form_encoded_surrogate_is_read_as_a_replacement_character(world, api):
    before = stored_rows()

    response = api.generic(
        "POST",
        "/api/clusters/",
        "name=lab%ED%A0%80",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 400
    assert list(json_error(response)) == ["name"]
    assert stored_rows() == before


# -- nesting -------------------------------------------------------------------------------


def write_operations(schema: dict) -> list[tuple[str, str]]:
    return [
        (method, path)
        for path, item in schema["paths"].items()
        for method in WRITE_METHODS
        if "application/json" in item.get(method, {}).get("requestBody", {}).get("content", {})
    ]


def test_a_body_nested_a_hundred_thousand_levels_is_a_400_everywhere(world, api):
    operations = write_operations(served_schema())
    assert len(operations) > 40
    before = stored_rows()
    wrong = []
    for method, path in operations:
        url = concrete(path, world)

        response = send(api, method, url, "[" * 100_000)

        expected = {"detail": f"JSON parse error - nested deeper than {MAX_DEPTH} levels."}
        if response.status_code != 400 or json_error(response) != expected:
            wrong.append(f"{method.upper()} {url}: {response.status_code} {response.content}")
    assert not wrong, "\n".join(wrong)
    assert stored_rows() == before


def nested(levels: int):
    value = "deep"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "url,body,field",
    [
        (
            "/api/clusters/",
            {"name": "deep", "policy_properties": {"x": nested(40)}},
            "policy_properties",
        ),
        ("/api/templates/", {"name": "deep", "networks": nested(100)}, "networks"),
        (
            "/api/leases/check/",
            {"name": "deep", "reservations": [{"x": nested(40)}]},
            "reservations",
        ),
        (
            "/api/schedulingpolicies/",
            {"name": "deep", "properties": nested(MAX_DEPTH)},
            "properties",
        ),
    ],
    ids=["cluster policy properties", "template networks", "reservations", "policy properties"],
)
def test_a_field_nested_deeper_than_the_limit_is_a_field_error(world, api, url, body, field):
    before = stored_rows()

    response = send(api, "post", url, json.dumps(body))

    assert response.status_code == 400
    assert json_error(response) == {field: [TOO_DEEP]}
    assert stored_rows() == before


def test_a_field_nested_up_to_the_limit_is_judged_by_its_own_rules(world, api):
    response = api.post(
        "/api/schedulingpolicies/",
        {"name": "deep", "properties": nested(MAX_DEPTH - 1)},
        format="json",
    )

    assert response.status_code == 400
    assert json_error(response) == {"properties": ["Properties are an object of name: value."]}


def test_a_blazar_expression_nested_thousands_deep_is_a_field_error(world, api, window):
    body = lease_body(*(t.isoformat() for t in window))
    body["reservations"] = [instances(resource_properties="[" * 100_000)]
    before = stored_rows()

    response = api.post("/api/leases/", body, format="json")

    assert response.status_code == 400
    assert json_error(response) == {"reservations": {"0": {"resource_properties": [TOO_DEEP]}}}
    assert stored_rows() == before


# -- one value per property ----------------------------------------------------------------

NOT_ONE_VALUE = (
    "'gpu' must be a single value (text, a number, true or false) or an object of operators, "
    'like {"in": ["a100", "h100"]} or {">": 64}.'
)


@pytest.mark.parametrize(
    "field", ["resource_properties", "hypervisor_properties", "host_properties"]
)
@pytest.mark.parametrize(
    "value, message",
    [
        (
            {"gpu": {"model": "a100"}},
            "'gpu': 'model' is not an operator; use ==, !=, <, <=, >, >=, in.",
        ),
        ({"gpu": ["a100"]}, NOT_ONE_VALUE),
        ({"gpu": None}, NOT_ONE_VALUE),
        (
            '["==", "$gpu", ["a100"]]',
            "'gpu': == compares with one value (text, a number, true or false); use in for a list.",
        ),
        ({"gpu": {"in": []}}, "'gpu': in takes a list of 1 to 100 values."),
        (
            {"gpu": {"in": [["a100"]]}},
            "'gpu': == compares with one value (text, a number, true or false); use in for a list.",
        ),
    ],
    ids=["unknown operator", "list", "null", "list in an expression", "empty in", "nested in"],
)
@pytest.mark.parametrize("url", ["/api/leases/", "/api/leases/check/"])
def test_a_host_property_that_is_not_one_value_is_a_field_error(
    world, api, window, url, field, value, message
):
    body = lease_body(*(t.isoformat() for t in window))
    body["reservations"] = [instances(**{field: value})]
    before = stored_rows()

    response = api.post(url, body, format="json")

    assert response.status_code == 400
    assert json_error(response) == {"reservations": {"0": {field: [message]}}}
    assert stored_rows() == before


@pytest.mark.parametrize(
    "value", [{"cpus": "many"}, {"memory_mb": -1}, {"cpus": True}, '[">=", "$vcpus", "1.5"]']
)
def test_a_minimum_that_is_not_a_whole_number_is_a_field_error(world, api, window, value):
    body = lease_body(*(t.isoformat() for t in window))
    body["reservations"] = [instances(resource_properties=value)]
    before = stored_rows()

    response = api.post("/api/leases/check/", body, format="json")

    assert response.status_code == 400
    name = "memory_mb" if "memory_mb" in str(value) else "cpus"
    assert json_error(response) == {
        "reservations": {"0": {"resource_properties": [f"{name} needs a whole number."]}}
    }
    assert stored_rows() == before


def test_flat_host_properties_are_still_taken_in_both_forms(world, api, window):
    world.host.capabilities = {"gpu": "a100", "ssd": True}
    world.host.save(update_fields=["capabilities"])
    body = lease_body(*(t.isoformat() for t in window))
    body["reservations"] = [
        instances(resource_properties={"gpu": "a100", "cpus": "8"}),
        instances(resource_properties='["and", ["==", "$ssd", true], [">=", "$vcpus", "8"]]'),
    ]

    response = api.post("/api/leases/", body, format="json")

    assert response.status_code == 201, response.json()
    properties = [r["host_properties"] for r in response.json()["reservations"]]
    assert properties == [{"gpu": "a100", "cpus": 8}, {"ssd": True, "cpus": 8}]


# -- bodies over the size limit ------------------------------------------------------------

TEN_MEGABYTES = json.dumps({"name": "x" * (10 * 1024 * 1024)})
TOO_LARGE = {"detail": "The request body is larger than 2560 KiB."}


def test_a_ten_megabyte_body_is_a_413_on_every_operation(world, api):
    schema = served_schema()
    operations = [
        (method, path)
        for path, item in schema["paths"].items()
        for method in item
        if method != "parameters"
    ]
    before = stored_rows()
    wrong = []
    for method, path in operations:
        url = concrete(path, world)

        response = send(api, method, url, TEN_MEGABYTES)

        if response.status_code != 413 or json_error(response) != TOO_LARGE:
            wrong.append(f"{method.upper()} {url}: {response.status_code} {response.content[:200]}")
    assert not wrong, "\n".join(wrong)
    assert stored_rows() == before


def test_a_ten_megabyte_body_to_an_unknown_path_is_a_413(world, api):
    response = send(api, "post", "/api/no-such-thing/", TEN_MEGABYTES)

    assert response.status_code == 413
    assert json_error(response) == TOO_LARGE


def test_a_file_part_larger_than_the_limit_is_not_held_to_it(world, api):
    """Multipart file parts stream to disk: the limit is for what is read into memory."""
    image = SimpleUploadedFile("disk.img", b"\0" * (3 * 1024 * 1024))

    response = api.post(
        "/api/clusters/", {"name": "from-a-form", "image": image}, format="multipart"
    )

    assert response.status_code == 201, response.json()
    assert Cluster.objects.filter(name="from-a-form").exists()


def test_a_multipart_field_larger_than_the_limit_is_a_413(world, api):
    before = stored_rows()

    response = api.post("/api/clusters/", {"name": "x" * (3 * 1024 * 1024)}, format="multipart")

    assert response.status_code == 413
    assert json_error(response) == TOO_LARGE
    assert stored_rows() == before
