"""Every route of the API is tried by the permission matrix, or is on a list saying where its
permissions are proven instead (or why it needs no grant): a route added to an app's
api/urls.py without either fails here, named.

The routes come from the URL configuration (tests/project/api/routes.py); what the matrix tries
comes from its rows. A method that needs the same permission on a route as one the matrix tries
there (PUT beside PATCH: both change the object) is covered by it.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from django.urls import resolve

from tests.project.access.test_permission_matrix import ACTIONS, PUBLIC, ROWS
from tests.project.api.routes import api_routes

REPO = Path(__file__).resolve().parents[3]

# What the matrix's section on scheduling policies tries (they fit no row).
POLICY_SECTION = (
    ("get", "/api/schedulingpolicies/"),
    ("get", "/api/schedulingpolicies/1/"),
    ("patch", "/api/schedulingpolicies/1/"),
    ("delete", "/api/schedulingpolicies/1/"),
)

# Routes the matrix does not try: where their permissions are proven instead, or why they need
# no grant. Move a route off this list when a row of the matrix takes it over.
NOT_IN_THE_MATRIX = {
    # VM operations: each needs its own action on the VM (operate, migrate).
    **{
        f"POST /api/vms/{{id}}/{operation}/": "tests/hosts/jobs/test_operations.py: a viewer "
        "gets 403, a caller who cannot see the VM 404, operate does not allow migrate"
        for operation in ("start", "shutdown", "poweroff", "suspend", "resume", "migrate")
    },
    **{
        route: "tests/hosts/snapshots/test_snapshots_api.py: whoever may operate the VM (its "
        "holder among them); anyone else 404"
        for route in (
            "GET /api/vms/{id}/snapshots/",
            "POST /api/vms/{id}/snapshots/",
            "GET /api/vms/{id}/snapshots/{sid}/",
            "DELETE /api/vms/{id}/snapshots/{sid}/",
            "POST /api/vms/{id}/snapshots/{sid}/revert/",
        )
    },
    "POST /api/images/": "tests/hosts/images/test_images_access.py: ClusterAdmin of the "
    "cluster uploads, whoever may create VMs uploads private images, a user who may not gets "
    "403, a hidden cluster is a 400 on the field",
    **{
        route: "tests/hosts/images/test_image_visibility.py: the owner and admins offer a "
        "shared image, only the member answers, others 404"
        for route in (
            "GET /api/images/{id}/members/",
            "POST /api/images/{id}/members/",
            "PATCH /api/images/{id}/members/{member_id}/",
            "DELETE /api/images/{id}/members/{member_id}/",
        )
    },
    "POST /api/hosts/{id}/trust-host-key/": "tests/hosts/test_ssh_trust.py "
    "(test_a_new_ssh_host_waits_for_an_admin_to_trust_the_key_it_offers): change_host on the "
    "host, 403 for a viewer, 404 for others",
    "GET /api/hosts/ssh-identity/": "tests/hosts/test_ssh_trust.py "
    "(test_corrals_public_key_is_shown_to_admins_only): who may add or change hosts; others 404",
    "POST /api/hosts/{id}/confirm-down/": "tests/hosts/sync/test_failover.py "
    "(test_only_who_may_change_the_host_confirms_it_down): change_host on the host, 403 for a "
    "viewer, 404 for others",
    "GET /api/me/quota/": "tests/hosts/quotas/test_seen.py: each caller's own quota only, "
    "anonymous refused; limits are set in the admin console by a system-wide grant",
    **{
        route: "tests/project/test_ssh_keys.py: each user's own keys only; another's key 404"
        for route in (
            "GET /api/me/sshkeys/",
            "POST /api/me/sshkeys/",
            "GET /api/me/sshkeys/{id}/",
            "DELETE /api/me/sshkeys/{id}/",
        )
    },
    **{
        route: "tests/project/test_api_tokens.py: each user's own tokens only; another's 404"
        for route in (
            "GET /api/me/tokens/",
            "POST /api/me/tokens/",
            "GET /api/me/tokens/{id}/",
            "DELETE /api/me/tokens/{id}/",
        )
    },
    "GET /api/vms/{id}/console-log/": "tests/hosts/guests/test_guest_access.py: operate on the VM; "
    "a viewer gets 403, who cannot see it 404",
    "POST /api/vms/{id}/console/": "tests/hosts/guests/test_guest_access.py and "
    "tests/hosts/guests/test_console_pages.py: operate on the VM, 404 for everyone else",
    "POST /api/vms/{id}/serial-console/": "tests/hosts/guests/test_serial_terminal.py and "
    "tests/hosts/guests/test_console_pages.py: operate on the VM, 404 for everyone else",
    "POST /api/vms/{id}/image/": "tests/hosts/images/test_images_from_vms.py: its holder or "
    "who may operate it, 404 for everyone else (a viewer too)",
    "GET /api/jobs/": "tests/hosts/jobs/test_jobs_api.py: jobs on the VMs the caller may see",
    "GET /api/jobs/{id}/": "tests/hosts/jobs/test_jobs_api.py: 404 for a job on a hidden VM",
    "POST /api/jobs/{id}/cancel/": "tests/hosts/jobs/test_jobs_api.py: cancel_job, or the "
    "requester",
    "GET /api/externaldomains/": "tests/hosts/sync/test_power_state_sync.py: listed by host for "
    "those who may see the host",
    "GET /api/externaldomains/{id}/": "tests/security/test_security.py: 404 without a grant",
    "GET /api/": "tests/project/api/test_api_root.py: the same collections for every signed-in "
    "caller (what each lists is restricted there), 401 for anyone else",
    "GET /api/events/": "tests/project/events/test_event_feed.py: each reader sees only the "
    "events of what they may see",
    "GET /api/clusters/{id}/balance/": "tests/scheduling/test_balancer.py: for those who may "
    "see the cluster, 404 for others",
    "PATCH /api/schedulingpolicyunits/{id}/": "tests/project/access/test_permission_matrix.py "
    "(test_a_system_wide_policy_admin_may_disable_a_unit, test_anyone_else_may_not_change_a_unit)"
    " and tests/scheduling/test_policies_api.py: a system-wide PolicyAdmin only",
    "PUT /api/schedulingpolicyunits/{id}/": "tests/scheduling/test_policies_api.py: a unit is "
    "changed by PATCH; PUT answers 405",
    "POST /api/schedulingpolicies/": "tests/scheduling/test_policies_api.py: PolicyAdmin "
    "somewhere creates policies, others get 403",
    "PUT /api/schedulingpolicies/{id}/": "the same check as PATCH (PolicyAdmin on every cluster "
    "using the policy), which the matrix tries",
    "POST /api/schedulingpolicies/{id}/clone/": "tests/scheduling/test_policies_api.py: "
    "PolicyAdmin somewhere clones, others get 403",
    "POST /api/schedulingpolicies/{id}/make-default/": "tests/scheduling/test_policies_api.py: "
    "a system-wide PolicyAdmin only",
    **{
        f"{method} /api/schedulingpolicies/{{policy_pk}}/{part}/{suffix}": "read by everyone "
        "signed in, as the policy; changed as the policy: tests/security/test_security.py "
        "(403 without PolicyAdmin)"
        for part in ("filters", "weights", "balances")
        for method, suffix in (("GET", ""), ("POST", ""), ("GET", "{id}/"), ("DELETE", "{id}/"))
    },
    "GET /api/schedulingpolicyunits/": "every signed-in caller reads the units: "
    "tests/scheduling/test_policies_api.py",
    "GET /api/schedulingpolicyunits/{id}/": "every signed-in caller reads the units: "
    "tests/security/test_security.py",
    "DELETE /api/schedulingpolicyunits/{id}/": "tests/scheduling/test_policies_api.py: a "
    "system-wide PolicyAdmin only",
    "POST /api/leases/check/": "tests/leases/test_lease_permissions.py: LeaseUser only",
    "GET /api/roles/": "every signed-in caller reads the roles: "
    "tests/project/access/test_roles_api.py",
    "GET /api/roles/actions/": "every signed-in caller reads the actions: "
    "tests/project/access/test_roles_api.py",
    "GET /api/roles/{id}/": "every signed-in caller reads the roles: "
    "tests/project/access/test_roles_api.py",
    **{
        f"{method} /api/roles/{suffix}": "tests/project/access/test_roles_api.py: only who may "
        "manage roles on the system, built-in roles never"
        for method, suffix in (
            ("POST", ""),
            ("PUT", "{id}/"),
            ("PATCH", "{id}/"),
            ("DELETE", "{id}/"),
        )
    },
    **{
        f"{method} /api/permissions/{suffix}": "tests/project/access/test_grants_api.py: "
        "granting, seeing and revoking at each scope, escalation refused"
        for method, suffix in (("GET", ""), ("POST", ""), ("GET", "{id}/"), ("DELETE", "{id}/"))
    },
    "DELETE /api/users/{id}/": "users are never deleted (405): "
    "tests/project/access/test_users_groups_api.py",
    "GET /api/me/": "every signed-in caller reads their own account: "
    "tests/project/access/test_users_groups_api.py",
}


def _tried_by_the_rows() -> set[tuple[str, str]]:
    """(route name, method) of every request the matrix's rows make."""
    stand_in = SimpleNamespace(pk=1)
    tried = set()
    for row in ROWS:
        for name in row.actions:
            action = ACTIONS[name]
            url = row.url(stand_in, action.suffix) if action.detail else row.url()
            tried.add((resolve(url).url_name, action.method))
        if row.new is not None:
            tried.add((resolve(row.url()).url_name, "post"))
    for method, url in POLICY_SECTION:
        tried.add((resolve(url).url_name, method))
    return tried


def _covered() -> set[str]:
    """Labels of the routes and methods the matrix tries, or that need the same permission on
    the same route as one it tries."""
    tried = _tried_by_the_rows()
    covered = set()
    for route in api_routes():
        tried_here = [method for method in route.methods if (route.name, method) in tried]
        permissions = {route.permission(method) for method in tried_here} - {None}
        for method in route.methods:
            if method in tried_here or route.permission(method) in permissions:
                covered.add(route.label(method))
    return covered


def _every_route() -> dict[str, str]:
    """Label -> route name, for every method of every route under /api/."""
    return {route.label(method): route.name for route in api_routes() for method in route.methods}


def test_every_api_route_is_in_the_matrix_or_listed_with_a_reason():
    public = {label for label, name in _every_route().items() if name in PUBLIC}

    missing = set(_every_route()) - _covered() - public - set(NOT_IN_THE_MATRIX)

    assert not missing, (
        "API routes neither tried by the permission matrix (a Row in test_permission_matrix.py)"
        " nor listed in NOT_IN_THE_MATRIX with where their permissions are proven:\n"
        + "\n".join(sorted(missing))
    )


def test_the_list_names_only_routes_that_exist_and_the_matrix_does_not_try():
    unknown = set(NOT_IN_THE_MATRIX) - set(_every_route())
    tried = set(NOT_IN_THE_MATRIX) & _covered()

    assert not unknown, f"not routes of the API: {sorted(unknown)}"
    assert not tried, f"tried by the matrix, to take off NOT_IN_THE_MATRIX: {sorted(tried)}"


def test_the_tests_the_list_names_exist():
    named = {
        path
        for reason in NOT_IN_THE_MATRIX.values()
        for path in re.findall(r"tests/\S+\.py", reason)
    }

    assert named
    assert [path for path in sorted(named) if not (REPO / path).is_file()] == []
