"""Pools in the admin console: the counts an operator needs, the pools below their prestarted
level, prestarting now, and granting access to a pool."""

from __future__ import annotations

import pytest

from hosts.models import Job, JobKind
from tests.pools.fixtures import add_pool_vms
from tests.project.admin.fixtures import admin_url, logged_in, run_action, shown_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab_pool(make_pool, make_user, cluster_a):
    """A pool wanting 3 prestarted VMs: 1 up, 1 starting, 1 down, 2 taken by a user."""
    pool = make_pool(cluster_a, name="lab", size=5, prestarted_vms=3)
    add_pool_vms(pool, ["up", "starting", "down"])
    add_pool_vms(pool, ["up", "down"], owner=make_user())
    return pool


def pool_row(response, pool):
    return next(row for row in response.context["cl"].result_list if row.pk == pool.pk)


def test_the_pool_list_shows_total_running_assigned_and_starting_vms(superuser_console, lab_pool):
    response = superuser_console.get(admin_url("pools.VmPool", "changelist"))

    row = pool_row(response, lab_pool)
    assert (row.total_vms, row.running_unassigned, row.assigned_vms, row.starting_vms) == (
        5,
        1,
        2,
        1,
    )
    html = response.content.decode()
    for column in ("Ready", "Starting", "Assigned"):
        assert f">{column}</a>" in html


def test_the_pool_list_filters_pools_below_their_prestarted_level(
    superuser_console, lab_pool, make_pool, cluster_a
):
    full = make_pool(cluster_a, name="full", size=1, prestarted_vms=1)
    add_pool_vms(full, ["up"])

    response = superuser_console.get(
        admin_url("pools.VmPool", "changelist"), {"prestarted": "short"}
    )

    assert [pool.name for pool in response.context["cl"].result_list] == ["lab"]


def test_prestart_now_needs_the_right_to_change_the_pool(staff_with_role, lab_pool):
    viewer = staff_with_role(["pools.view_vmpool"], lab_pool)

    response = run_action(logged_in(viewer), "pools.VmPool", "prestart_now", [lab_pool])

    assert "prestart_now" not in response.content.decode()
    assert not Job.objects.filter(vm__pool=lab_pool).exists()


def test_prestart_now_starts_what_the_pool_misses(superuser_console, lab_pool):
    response = run_action(superuser_console, "pools.VmPool", "prestart_now", [lab_pool])

    # 3 wanted, 1 up and 1 starting: one of the stopped unassigned VMs is started.
    assert Job.objects.filter(vm__pool=lab_pool, kind=JobKind.START).count() == 1
    assert ("info", "Queued 1 start job(s).") in shown_messages(response)


def test_a_pool_page_links_to_the_grant_form_filled_in_for_that_pool(make_pool, make_user):
    from django.test import Client

    pool = make_pool()
    root = make_user(superuser=True)
    client = Client()
    client.force_login(root)

    page = client.get(f"/admin/pools/vmpool/{pool.pk}/change/").content.decode()
    link = page.split('id="grant-access"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
    form = client.get(link.replace("&amp;", "&")).content.decode()

    assert link.startswith("/admin/project/usergrant/add/?")
    assert f'<option value="pool:{pool.pk}" selected>VM pool: {pool.name}</option>' in form
