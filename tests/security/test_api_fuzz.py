"""Every API operation, fuzzed from the OpenAPI schema the API serves (/api/schema/).

Schemathesis generates valid and invalid requests for each operation (path ids, query strings,
bodies); they are sent in process through the WSGI application to the test database, as a
superuser and as an ordinary user (UserRole on one pool, LeaseUser on the system). Whatever
comes in, the API must never answer 5xx, no host URI it returns may hold a password, and every
answer must be one the schema documents: its status code listed for the operation, its content
type listed for that status, its body valid against the documented schema (so every 4xx is a
documented JSON error), the headers documented as required present. A caller without
credentials gets the documented 401 from every operation that needs them, a locked-out log-in
the documented 429.

Most generated ids and references are pointed at objects that exist, and most lease windows at
times that could be accepted, so requests reach past "not found" into the services.
Generation is derandomized: a failure reproduces on the next run.
"""

from __future__ import annotations

import functools
import json
import os
import re
from datetime import timedelta

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import override_settings
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission
from hypothesis import HealthCheck, settings

from project.access import scopes
from scheduling.models import PolicyUnit
from tests.conftest import unique
from tests.project.api.routes import model_of, related_fields, route_named_by

# Requests per operation and caller in the fuzzing phase (valid and invalid ones together);
# CORRAL_FUZZ_EXAMPLES raises it for a deeper run, CORRAL_FUZZ_COVERAGE=1 adds the coverage
# phase (every boundary case of every field: about a hundred requests per operation).
MAX_EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "10"))
COVERAGE_PHASE = os.environ.get("CORRAL_FUZZ_COVERAGE") == "1"
PASSWORD = "pw-Corral-1"  # what make_user gives every user
# The largest pool the fuzzer asks for.
POOL_SIZE_LIMIT = 50

APP = get_wsgi_application()
CONFIG = schemathesis.Config.from_dict(
    {
        "cache": {"enabled": False},
        # Unbounded by max-examples, the coverage phase is too slow for every CI run.
        "phases": {"coverage": {"enabled": COVERAGE_PHASE}},
        "generation": {
            "max-examples": MAX_EXAMPLES,
            "deterministic": True,
            # The caller's token is set by the test; generated credentials would replace it.
            "with-security-parameters": False,
        },
    }
)
with override_settings(ALLOWED_HOSTS=["localhost"]):
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", APP, config=CONFIG)

# What a documented answer means: the schema lists its status, content type, body and headers.
CONFORMANCE = [
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.response_headers_conformance,
]

FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(autouse=True)
def keep_test_connection():
    """The WSGI handler closes the connection after each request, which would end the test's
    transaction; Django's test client keeps it open the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _ids(model, **filters) -> list:
    return list(model.objects.filter(**filters).order_by("pk").values_list("pk", flat=True))


def _names(model, field: str = "name") -> list:
    return list(model.objects.order_by("pk").values_list(field, flat=True))


def _grant_ids() -> list[str]:
    roles = {"permission__codename__startswith": "role_"}
    return [f"u{pk}" for pk in _ids(UserObjectPermission, **roles)] + [
        f"g{pk}" for pk in _ids(GroupObjectPermission, **roles)
    ]


# Routes whose ids are not their model's primary keys: a grant's id is "u" or "g" and its row's
# number; a policy's balancer is named by its unit. Every other route's {id} names rows of the
# model its viewset serves (tests/project/api/routes.py).
IDS_BY_ROUTE = {
    "grant-detail": _grant_ids,
    "policy-balance-detail": lambda: _ids(PolicyUnit, is_balance=True),
}


def path_ids(path: str, parameter: str):
    """ids() -> the values that name existing objects in ``{parameter}`` of a schema path (the
    objects of the route the path has up to that parameter); None if nothing says which."""
    route = route_named_by(path, parameter)
    if route is None:
        return None
    if route.name in IDS_BY_ROUTE:
        return IDS_BY_ROUTE[route.name]
    model = model_of(route.view)
    return None if model is None else functools.partial(_ids, model)


def _values(kinds: set) -> list:
    return [value for model, field in sorted(kinds, key=str) for value in _names(model, field)]


# Body fields that name other objects, by id or by name: every writable related field of the
# API's serializers.
BODY_REFERENCES = {
    field: functools.partial(_values, kinds) for field, kinds in sorted(related_fields().items())
}
# What a grant's object_id names, by its object_type: each scope's objects (the system has none).
SCOPE_IDS = {
    name: functools.partial(_ids, scopes.model(name)) for name in scopes.names() if name != "system"
}


def _existing(generated, candidates: list):
    """Three generated values in four become one of ``candidates``; the rest stay as they are
    (negative numbers and values of another type always stay)."""
    if not candidates or isinstance(generated, bool):
        return generated
    if isinstance(generated, int):
        index = generated
    elif isinstance(generated, str) and isinstance(candidates[0], str):
        index = len(generated)
    else:
        return generated
    if index < 0 or index % 4 == 3:
        return generated
    return candidates[index % len(candidates)]


def aim_path(case) -> None:
    params = case.path_parameters
    for name in params or {}:
        ids = path_ids(case.path, name)
        if ids is not None:
            params[name] = _existing(params[name], ids())


def aim_body(case) -> None:
    body = case.body
    if not isinstance(body, dict):
        return
    for field, candidates in BODY_REFERENCES.items():
        if field not in body:
            continue
        known = candidates()
        if isinstance(body[field], list):
            body[field] = [_existing(value, known) for value in body[field]]
        else:
            body[field] = _existing(body[field], known)
    object_type = body.get("object_type")
    scope = SCOPE_IDS.get(object_type) if isinstance(object_type, str) else None
    if scope is not None and "object_id" in body:
        body["object_id"] = _existing(body["object_id"], scope())
    if case.path.startswith("/api/vmpools/") and isinstance(body.get("size"), int):
        # Growing a pool queues a job per new VM in the request: a size in the thousands is
        # valid but takes a minute on PostgreSQL, for nothing the smaller sizes do not cover.
        body["size"] = body["size"] % (POOL_SIZE_LIMIT + 1) if body["size"] > 0 else body["size"]
    if case.path.startswith("/api/leases/"):
        now = timezone.now()
        times = {
            "start": "now",
            "start_date": (now + timedelta(hours=1)).isoformat(),
            "end": (now + timedelta(hours=3)).isoformat(),
            "end_date": (now + timedelta(hours=3)).isoformat(),
            "before_end": (now + timedelta(hours=2)).isoformat(),
            "before_end_date": (now + timedelta(hours=2)).isoformat(),
        }
        for field, when in times.items():
            if isinstance(body.get(field), str):
                body[field] = _existing(body[field], [when])


def keep_event_feed_short(case) -> None:
    """The event feed waits up to ``timeout`` seconds for news; answer at once instead."""
    if case.path != "/api/events/" or not case.query or "timeout" not in case.query:
        return
    try:
        waits = 0 < float(case.query["timeout"]) <= 60
    except (TypeError, ValueError):
        waits = False
    if waits:
        case.query["timeout"] = "0"


def _uris(data):
    """Every value of a "uri" key in a JSON document."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "uri" and isinstance(value, str):
                yield value
            else:
                yield from _uris(value)
    elif isinstance(data, list):
        for item in data:
            yield from _uris(item)


def _has_password(uri: str) -> bool:
    """Whether the user information of ``scheme://user:password@host/...`` has a password."""
    authority = uri.partition("://")[2].split("/")[0]
    userinfo = authority.rpartition("@")[0]
    return bool(userinfo.partition(":")[2])


def call_and_check(case, authorization: str) -> None:
    aim_path(case)
    aim_body(case)
    keep_event_feed_short(case)
    response = case.call(base_url="http://testserver", headers={"Authorization": authorization})
    request = f"{case.method} {response.request.url} body={case.body!r}"
    assert response.status_code < 500, (
        f"{request} answered {response.status_code}: {response.text[:2000]}"
    )
    if response.headers.get("content-type", [""])[0].startswith("application/json"):
        for uri in _uris(json.loads(response.content)):
            assert not _has_password(uri), f"{request} returned a host URI with a password"
    case.validate_response(response, checks=CONFORMANCE)


@schema.parametrize()
@FUZZ_SETTINGS
def test_api_as_superuser(case, world, admin_user, token_for):
    call_and_check(case, token_for(admin_user))


@schema.parametrize()
@FUZZ_SETTINGS
def test_api_as_pool_user(case, world, pool_user, token_for):
    call_and_check(case, token_for(pool_user))


def _needs_credentials(operation) -> bool:
    """Whether the schema says the operation needs credentials (no empty security option)."""
    return {} not in operation.definition.raw.get("security", [{}])


OPERATIONS = [result.ok() for result in schema.get_all_operations()]
ANONYMOUS_OPERATIONS = [
    pytest.param(operation, id=operation.label)
    for operation in OPERATIONS
    if _needs_credentials(operation)
]


def test_every_path_parameter_names_objects_the_fuzzer_aims_at():
    unaimed = [
        f"{operation.label}: {{{name}}}"
        for operation in OPERATIONS
        for name in re.findall(r"\{(\w+)\}", operation.path)
        if path_ids(operation.path, name) is None
    ]

    assert unaimed == [], (
        "No ids known for these path parameters: give the route's viewset a queryset (or a "
        "model), or add the route to IDS_BY_ROUTE."
    )


def test_only_the_token_endpoint_is_open_without_credentials():
    open_ones = [operation.label for operation in OPERATIONS if not _needs_credentials(operation)]

    assert open_ones == ["POST /api/auth/token/"]
    assert len(ANONYMOUS_OPERATIONS) == len(OPERATIONS) - 1 > 100


@pytest.mark.parametrize("operation", ANONYMOUS_OPERATIONS)
def test_a_caller_without_credentials_gets_the_documented_401(operation, db):
    # Credentials are checked before anything is looked up: any well-formed id will do.
    ids = {"id": "u1" if operation.path.startswith("/api/permissions/") else 1}
    ids |= {"policy_pk": 1, "member_id": 1, "sid": 1}
    path_parameters = {name: ids[name] for name in ids if f"{{{name}}}" in operation.path}
    case = operation.Case(path_parameters=path_parameters)

    response = case.call(base_url="http://testserver")

    assert response.status_code == 401, f"{operation.label}: {response.text[:300]}"
    assert response.headers["www-authenticate"] == ["Token"]
    case.validate_response(response, checks=CONFORMANCE)


def test_a_locked_out_log_in_gets_the_documented_429(make_user, settings):
    user = make_user(unique("locked"))
    operation = schema["/api/auth/token/"]["POST"]
    wrong = operation.Case(
        body={"username": user.username, "password": "wrong"}, media_type="application/json"
    )
    for _ in range(settings.CORRAL_LOGIN_MAX_FAILURES):
        refused = wrong.call(base_url="http://testserver")
        assert refused.status_code == 400
        wrong.validate_response(refused, checks=CONFORMANCE)
    right = operation.Case(
        body={"username": user.username, "password": PASSWORD}, media_type="application/json"
    )

    response = right.call(base_url="http://testserver")

    assert response.status_code == 429
    assert int(response.headers["retry-after"][0]) > 0
    right.validate_response(response, checks=CONFORMANCE)
