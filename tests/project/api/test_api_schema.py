"""What the OpenAPI schema (/api/schema/) promises: nulls and blanks where the API sends them,
one name per shape, plain lists where actions answer plain lists, and every error an operation
can answer. tests/security/test_api_fuzz.py checks real answers against it."""

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

# Actions answering a plain JSON list (no count, no pages): path, method.
PLAIN_LISTS = [
    ("/api/roles/actions/", "get"),
    ("/api/schedulingpolicies/{policy_pk}/filters/", "get"),
    ("/api/schedulingpolicies/{policy_pk}/weights/", "get"),
    ("/api/schedulingpolicies/{policy_pk}/balances/", "get"),
    ("/api/vms/{id}/return/", "post"),
    ("/api/images/{id}/members/", "get"),
    ("/api/vms/{id}/snapshots/", "get"),
]
# Actions answering one object that is not a page of rows.
SINGLE_OBJECTS = [
    ("/api/leases/check/", "post", "CapacityAnswer"),
    ("/api/clusters/{id}/balance/", "get", "BalancePreview"),
    ("/api/events/", "get", "EventFeed"),
]
METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def schema():
    """The schema as served; anyone may read it, and it reads nothing from the database."""
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def component(schema, ref: str) -> dict:
    return schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def resolve(schema, node: dict) -> dict:
    while "$ref" in node:
        prefix, name = node["$ref"].rsplit("/", 1)
        node = schema["components"][prefix.split("/")[-1]][name]
    return node


def enum_values(schema, node: dict) -> set:
    """Every value an enum property may take, through $ref, oneOf and allOf."""
    node = resolve(schema, node)
    values = set(node.get("enum", []))
    for part in node.get("oneOf", []) + node.get("allOf", []):
        values |= enum_values(schema, part)
    return values


def operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def success_schema(schema, operation: dict) -> dict:
    code = min(code for code in operation["responses"] if code.startswith("2"))
    return operation["responses"][code]["content"]["application/json"]["schema"]


def test_a_vm_nobody_holds_has_a_null_owner(schema):
    owner = schema["components"]["schemas"]["VirtualMachine"]["properties"]["owner"]

    assert owner["nullable"] is True


def test_a_job_corral_started_itself_has_a_null_requested_by(schema):
    requested_by = schema["components"]["schemas"]["Job"]["properties"]["requested_by"]

    assert requested_by["nullable"] is True


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("Policy", "balance"),
        ("Lease", "group"),
        ("Lease", "before_end_date"),
        ("VirtualMachine", "host"),
        ("Job", "error"),
        ("Reservation", "amount"),
        ("Grant", "object_id"),
    ],
)
def test_other_fields_the_api_sends_as_null_are_nullable(schema, name, field):
    assert schema["components"]["schemas"][name]["properties"][field]["nullable"] is True


def test_fields_that_are_never_null_are_not_nullable(schema):
    properties = schema["components"]["schemas"]["Policy"]["properties"]

    assert [
        name for name in ("filters", "weights", "clusters") if "nullable" in properties[name]
    ] == []


def test_a_vm_power_state_may_be_blank_as_before_its_host_reports(schema):
    power_state = schema["components"]["schemas"]["VirtualMachine"]["properties"]["power_state"]

    assert {"", "running", "shutoff", "report_missing"} <= enum_values(schema, power_state)


def test_taking_a_vm_and_a_lease_allocation_are_two_components(schema):
    taken = success_schema(schema, schema["paths"]["/api/vmpools/{id}/allocatevm/"]["post"])
    reservation = schema["components"]["schemas"]["Reservation"]
    held = reservation["properties"]["allocations"]["items"]

    assert taken["$ref"] != held["$ref"]
    assert set(component(schema, taken["$ref"])["properties"]) == {"vm", "job", "instant"}
    assert set(component(schema, held["$ref"])["properties"]) == {
        "host",
        "host_name",
        "slots",
        "whole_host",
    }


def test_the_schema_is_valid_openapi_built_without_a_warning(tmp_path):
    """drf-spectacular warns of a component name given to two shapes, of enum names it had
    to make up, of fields it could not type: each a place where the schema would mislead."""
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )

    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3.0")


@pytest.mark.parametrize(("path", "method"), PLAIN_LISTS)
def test_actions_answering_a_plain_list_are_documented_as_one(schema, path, method):
    operation = schema["paths"][path][method]
    parameters = {p["name"] for p in operation.get("parameters", [])}

    assert success_schema(schema, operation)["type"] == "array"
    assert parameters.isdisjoint({"limit", "offset", "ordering", "q"})


@pytest.mark.parametrize(("path", "method", "name"), SINGLE_OBJECTS)
def test_actions_answering_one_object_are_not_documented_as_pages(schema, path, method, name):
    operation = schema["paths"][path][method]

    assert success_schema(schema, operation) == {"$ref": f"#/components/schemas/{name}"}


def test_every_paginated_list_is_documented_with_its_page(schema):
    plain = {path for path, method in PLAIN_LISTS if method == "get"}
    lists = [
        (path, operation)
        for path, method, operation in operations(schema)
        if operation["operationId"].endswith("_list") and path not in plain
    ]

    assert len(lists) == 18
    for path, operation in lists:
        page = component(schema, success_schema(schema, operation)["$ref"])
        parameters = {p["name"] for p in operation["parameters"]}
        assert {"count", "next", "previous", "results"} <= set(page["properties"]), path
        assert {"limit", "offset"} <= parameters, path


def test_every_operation_documents_the_401_with_how_to_authenticate(schema):
    for path, method, operation in operations(schema):
        unauthorized = resolve(schema, operation["responses"]["401"])
        assert unauthorized["headers"]["WWW-Authenticate"]["required"] is True, (path, method)


def test_every_operation_on_an_object_documents_the_404(schema):
    on_objects = [(p, m, o) for p, m, o in operations(schema) if "{" in p]

    assert len(on_objects) > 50
    assert [(p, m) for p, m, o in on_objects if "404" not in o["responses"]] == []


def test_every_operation_taking_a_body_documents_400_and_413(schema):
    with_body = [(p, m, o) for p, m, o in operations(schema) if "requestBody" in o]

    assert len(with_body) > 40
    assert [(p, m) for p, m, o in with_body if not {"400", "413"} <= set(o["responses"])] == []


def test_every_operation_taking_query_parameters_documents_400(schema):
    with_query = [
        (p, m, o)
        for p, m, o in operations(schema)
        if any(parameter["in"] == "query" for parameter in o.get("parameters", []))
    ]

    assert len(with_query) > 15
    assert [(p, m) for p, m, o in with_query if "400" not in o["responses"]] == []


def test_every_write_documents_403_and_409(schema):
    writes = [(p, m, o) for p, m, o in operations(schema) if m != "get"]

    assert [(p, m) for p, m, o in writes if not {"403", "409"} <= set(o["responses"])] == []


def test_the_token_endpoint_needs_no_credentials_and_documents_the_lockout(schema):
    operation = schema["paths"]["/api/auth/token/"]["post"]
    too_many = resolve(schema, operation["responses"]["429"])

    assert {} in operation["security"]
    assert too_many["headers"]["Retry-After"]["required"] is True
    assert too_many["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }


def test_errors_are_documented_as_the_two_json_shapes(schema):
    bad = resolve(schema, schema["paths"]["/api/vms/"]["post"]["responses"]["400"])
    not_found = resolve(schema, schema["paths"]["/api/vms/{id}/"]["get"]["responses"]["404"])
    error = schema["components"]["schemas"]["Error"]

    assert bad["content"]["application/json"]["schema"]["anyOf"] == [
        {"$ref": "#/components/schemas/FieldErrors"},
        {"$ref": "#/components/schemas/Error"},
    ]
    assert not_found["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    assert (error["required"], error["properties"]["detail"]) == (["detail"], {"type": "string"})


@pytest.mark.parametrize(
    ("path", "method"), [("/api/leases/", "post"), ("/api/leases/check/", "post")]
)
def test_a_lease_body_is_documented_as_blazar_takes_it(schema, path, method):
    body = schema["paths"][path][method]["requestBody"]["content"]
    lease = component(schema, body["application/json"]["schema"]["$ref"])
    reservation = component(schema, lease["properties"]["reservations"]["items"]["$ref"])

    assert list(body) == ["application/json"]
    assert lease["allOf"] == [
        {"anyOf": [{"required": ["start"]}, {"required": ["start_date"]}]},
        {"anyOf": [{"required": ["end"]}, {"required": ["end_date"]}]},
    ]
    assert [kind["required"] for kind in reservation["oneOf"]] == [
        ["vcpus", "memory_mb", "amount"],
        ["min"],
    ]


def test_a_lease_update_documents_reservation_changes_and_additions(schema):
    body = schema["paths"]["/api/leases/{id}/"]["patch"]["requestBody"]["content"]
    update = component(schema, body["application/json"]["schema"]["$ref"])
    item = component(schema, update["properties"]["reservations"]["items"]["$ref"])
    change, addition = (component(schema, kind["$ref"]) for kind in item["oneOf"])

    assert change["required"] == ["id"]
    assert {"id", "amount", "min", "max", "resource_properties"} <= set(change["properties"])
    assert "id" not in addition["properties"]
    assert addition["required"] == ["resource_type"]


def test_the_api_root_is_documented_as_names_and_urls(schema):
    root = schema["paths"]["/api/"]["get"]

    assert success_schema(schema, root) == {
        "type": "object",
        "description": "Each collection's name (its path under /api/) and its absolute URL.",
        "additionalProperties": {"type": "string", "format": "uri"},
    }


def test_a_vm_documents_its_hosts_name_as_read_only_and_null_when_it_has_none(schema):
    host_name = schema["components"]["schemas"]["VirtualMachine"]["properties"]["host_name"]

    assert (host_name["type"], host_name["readOnly"], host_name["nullable"]) == (
        "string",
        True,
        True,
    )
