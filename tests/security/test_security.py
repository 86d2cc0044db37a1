"""Security checks across the whole API and the portal's forms.

- Every API operation the schema lists refuses a caller without credentials (401 with
  WWW-Authenticate, or 403), and a session without its CSRF token.
- Every object URL answers 404 to a signed-in user holding no grant on the object, except for
  what everyone may read (roles, scheduling policies and their units), where writes are 403.
- Every portal form refuses a POST without its CSRF token (403), and nothing changes.
- Host URIs carrying a password are refused with a field message, and never returned.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission
from rest_framework.test import APIClient

from hosts.models import Cluster, Host, Job, VirtualMachine
from hosts.views import OPERATION_KINDS
from leases import services as lease_services
from leases.models import Lease
from pools.models import VmPool
from project.models import Role
from scheduling.models import Policy, PolicyUnit
from tests.conftest import unique
from tests.security.conftest import User, World
from tests.security.operations import concrete, object_ids, schema_operations

# Everyone signed in may read these (roles, policies, policy units and a policy's parts).
READABLE_BY_EVERYONE = {"roles", "schedulingpolicies", "schedulingpolicyunits"}
# The one operation that takes no credentials: it is where credentials go.
PUBLIC_OPERATIONS = {("post", "/api/auth/token/")}


def call(client, method: str, url: str):
    return getattr(client, method)(url, {}, format="json")


def snapshot(world: World) -> dict:
    """What the calls below must leave untouched."""
    return {
        "hosts": list(Host.objects.order_by("pk").values_list("pk", "name", "uri")),
        "vms": list(VirtualMachine.objects.order_by("pk").values_list("pk", "name", "owner_id")),
        "jobs": Job.objects.count(),
        "leases": list(Lease.objects.order_by("pk").values_list("pk", "status", "end_date")),
        "pools": list(VmPool.objects.order_by("pk").values_list("pk", "name", "size")),
        "policies": list(
            Policy.objects.order_by("pk").values_list("pk", "name", "is_default", "balance_id")
        ),
        "policy parts": (world.policy.filters.count(), world.policy.weights.count()),
        "roles": list(Role.objects.order_by("pk").values_list("pk", "name")),
        "users": list(User.objects.order_by("pk").values_list("pk", "username", "is_active")),
        "groups": list(Group.objects.order_by("pk").values_list("pk", "name")),
        "grants": (UserObjectPermission.objects.count(), GroupObjectPermission.objects.count()),
        "clusters": list(Cluster.objects.order_by("pk").values_list("pk", "name", "description")),
    }


def test_every_operation_without_credentials_is_refused(world):
    before = snapshot(world)
    refused, wrong = 0, []
    for method, path in schema_operations():
        if (method, path) in PUBLIC_OPERATIONS:
            continue
        url = concrete(path, world)
        response = call(APIClient(), method, url)
        challenged = response.status_code == 401 and response.headers.get("WWW-Authenticate")
        if challenged or response.status_code == 403:
            refused += 1
        else:
            wrong.append(f"{method.upper()} {url}: {response.status_code}")
    assert not wrong, "answered without credentials:\n" + "\n".join(wrong)
    assert refused > 100
    assert snapshot(world) == before


def test_the_token_endpoint_is_the_only_public_operation(world):
    response = APIClient().post("/api/auth/token/", {}, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"username", "password"}


def test_an_unknown_or_malformed_token_is_refused_with_json(world):
    for header in ("Token not-a-real-token", "Token", "Token a b", "Bearer x", "Token \x7f"):
        response = APIClient().get("/api/vms/", HTTP_AUTHORIZATION=header)

        assert response.status_code == 401, header
        assert response.headers["WWW-Authenticate"] == "Token"
        assert "detail" in response.json()


def test_api_writes_over_a_session_need_the_csrf_token(world, pool_user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(pool_user)
    pool_vm = world.pool_vms[0]
    before = Job.objects.count()

    response = client.post(f"/api/vms/{pool_vm.pk}/start/", {}, format="json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert Job.objects.count() == before


def test_every_object_url_is_not_found_without_a_grant(world, make_user):
    nobody = make_user(unique("nobody"))
    client = APIClient()
    client.force_authenticate(nobody)
    before = snapshot(world)
    operations = [(m, p) for m, p in schema_operations() if "{" in p]
    kinds = {path.strip("/").split("/")[1] for _, path in operations}
    assert kinds <= set(object_ids(world)), f"no object made for {kinds - set(object_ids(world))}"

    wrong = []
    for method, path in operations:
        url = concrete(path, world)
        kind = path.strip("/").split("/")[1]
        if kind not in READABLE_BY_EVERYONE:
            expected = {404}
        elif method == "get":
            expected = {200}
        else:
            # Seen but not theirs to change: refused (a body that is invalid anyway may be
            # reported first; that tells nothing the schema does not).
            expected = {400, 403}
        response = call(client, method, url)
        if response.status_code not in expected:
            wrong.append(f"{method.upper()} {url}: {response.status_code}, expected {expected}")
    assert not wrong, "\n".join(wrong)
    assert len(operations) > 60
    assert snapshot(world) == before


@pytest.fixture
def own_lease(pool_user, world):
    """An active lease of the pool user (LeaseOwner on it), one instance on the world's host."""
    return lease_services.create_lease(
        owner=pool_user,
        name=unique("own-lease"),
        start=timezone.now(),
        end=timezone.now() + timedelta(hours=2),
        reservations=[
            {"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 128, "amount": 1}
        ],
    )


def portal_forms(world: World, lease: Lease) -> list[tuple[str, dict]]:
    """Every form of the portal that changes something: (URL, the fields it posts)."""
    vm = world.pool_vms[0]
    end = (timezone.now() + timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M")
    lease_fields = {"name": "csrf-lease", "start_now": "on", "end": end, "vcpus": 1}
    return [
        (f"/pools/{world.pool.pk}/take/", {}),
        (f"/vms/{vm.pk}/return/", {}),
        *[(f"/vms/{vm.pk}/{operation}/", {}) for operation in sorted(OPERATION_KINDS)],
        ("/leases/new/", {**lease_fields, "memory_mb": 128, "amount": 1}),
        ("/leases/check/", {**lease_fields, "memory_mb": 128, "amount": 1}),
        (f"/leases/{lease.pk}/end/", {"end": end}),
        (f"/leases/{lease.pk}/launch/", {"template": world.template.pk, "name": "csrf-vm"}),
        (f"/leases/{lease.pk}/delete/", {}),
        ("/logout/", {}),
    ]


def test_every_portal_form_refuses_a_post_without_the_csrf_token(world, pool_user, own_lease):
    client = Client(enforce_csrf_checks=True)
    client.force_login(pool_user)
    before = snapshot(world)

    for url, fields in portal_forms(world, own_lease):
        response = client.post(url, fields)

        assert response.status_code == 403, url
        assert b"CSRF" in response.content, url
    assert snapshot(world) == before
    assert client.get("/vms/").status_code == 200  # still signed in: the logout was refused


def test_a_portal_form_with_its_csrf_token_goes_through(world, pool_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(pool_user)
    client.get("/")
    token = client.cookies["csrftoken"].value

    response = client.post("/logout/", {"csrfmiddlewaretoken": token})

    assert response.status_code == 302
    assert client.get("/vms/").status_code == 302  # signed out: sent to the log-in page


def test_the_login_form_needs_its_csrf_token(world, make_user):
    user = make_user(unique("csrf-login"))

    response = Client(enforce_csrf_checks=True).post(
        "/login/", {"username": user.username, "password": "pw-Corral-1"}
    )

    assert response.status_code == 403


CREDENTIAL_URIS = [
    "qemu+ssh://user:secret@h.example.org/system",
    "qemu+ssh://:secret@h.example.org/system",
    "qemu+tcp://root:secret@h.example.org:16509/system",
    "qemu+ssh://root:se%40cret@h.example.org/system",
]


@pytest.mark.parametrize("uri", CREDENTIAL_URIS)
def test_a_new_host_with_a_password_in_its_uri_is_refused(world, admin_user, client_for, uri):
    before = snapshot(world)

    response = client_for(admin_user).post(
        "/api/hosts/", {"name": "with-password", "cluster": world.cluster.pk, "uri": uri}
    )

    assert response.status_code == 400
    assert "password" in response.json()["uri"][0]
    assert "secret" not in response.content.decode()
    assert snapshot(world) == before


@pytest.mark.parametrize("method", ["patch", "put"])
def test_a_host_cannot_be_given_a_password_in_its_uri(world, admin_user, client_for, method):
    body = {"name": world.host.name, "cluster": world.cluster.pk, "uri": CREDENTIAL_URIS[0]}

    response = getattr(client_for(admin_user), method)(f"/api/hosts/{world.host.pk}/", body)

    assert response.status_code == 400
    assert "password" in response.json()["uri"][0]
    assert "secret" not in response.content.decode()
    world.host.refresh_from_db()
    assert "secret" not in world.host.uri


def test_a_stored_password_in_a_host_uri_is_never_returned(world, admin_user, client_for):
    # A row written outside the API and the admin (a script, an old import): validation never
    # saw it, and the API must still not hand the password out.
    legacy = Host.objects.create(
        cluster=world.cluster, name="legacy", uri="qemu+ssh://root:secret@legacy.example/system"
    )
    client = client_for(admin_user)

    reads = [
        client.get("/api/hosts/"),
        client.get(f"/api/hosts/{legacy.pk}/"),
        client.get("/api/hosts/?q=legacy"),
    ]
    write = client.patch(f"/api/hosts/{legacy.pk}/", {"description": "changed"})

    for response in reads:
        assert response.status_code == 200
        assert "secret" not in response.content.decode()
    assert "secret" not in write.content.decode()
    assert client.get(f"/api/hosts/{legacy.pk}/").json()["uri"] == (
        "qemu+ssh://root@legacy.example/system"
    )


def test_what_everyone_may_read_only_its_admins_may_change(world, make_user):
    client = APIClient()
    client.force_authenticate(make_user(unique("reader")))
    policy = f"/api/schedulingpolicies/{world.policy.pk}"
    spare_filter = PolicyUnit.objects.filter(is_filter=True).exclude(
        pk=world.policy_filter.unit_id
    )[0]
    spare_weight = PolicyUnit.objects.filter(is_weight=True).exclude(
        pk=world.policy_weight.unit_id
    )[0]
    writes = [
        ("put", f"{policy}/", {"name": "renamed", "description": "", "properties": {}}),
        ("patch", f"{policy}/", {"description": "changed"}),
        ("delete", f"{policy}/", {}),
        ("post", f"{policy}/clone/", {"name": "copied"}),
        ("post", f"{policy}/make-default/", {}),
        ("post", f"{policy}/filters/", {"unit": spare_filter.name}),
        ("delete", f"{policy}/filters/{world.policy_filter.pk}/", {}),
        ("post", f"{policy}/weights/", {"unit": spare_weight.name, "factor": 2}),
        ("delete", f"{policy}/weights/{world.policy_weight.pk}/", {}),
        ("post", f"{policy}/balances/", {"unit": world.policy.balance.name}),
        ("delete", f"{policy}/balances/{world.policy.balance_id}/", {}),
        ("post", "/api/schedulingpolicies/", {"name": "mine", "properties": {}}),
        ("delete", f"/api/schedulingpolicyunits/{world.policy.balance_id}/", {}),
        ("post", "/api/roles/", {"name": "Mine", "actions": []}),
        ("put", f"/api/roles/{world.role.pk}/", {"name": "Renamed", "actions": []}),
        ("patch", f"/api/roles/{world.role.pk}/", {"description": "changed"}),
        ("delete", f"/api/roles/{world.role.pk}/", {}),
    ]
    before = snapshot(world)

    for method, url, body in writes:
        response = getattr(client, method)(url, body, format="json")

        assert response.status_code == 403, f"{method.upper()} {url}: {response.content[:300]}"
    assert snapshot(world) == before
