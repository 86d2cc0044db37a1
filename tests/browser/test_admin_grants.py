"""Granting access in the admin console, in a real browser: the object is found by typing its
name in a picker that offers only what the admin may grant on, the grant list filters by the
kinds of object one grants on, and the confirmation names the role as people say it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from project.access.permissions import holds
from tests.browser.conftest import PASSWORD, log_in

pytestmark = pytest.mark.slow


def log_in_to_console(page, user) -> None:
    page.goto("/admin/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#site-name")).to_be_visible()


def search_picker(page, term: str):
    """Open the grant form's object picker, type ``term``; the options it then offers."""
    page.locator(".field-object .select2-selection").click()
    page.locator(".select2-search__field").fill(term)
    options = page.locator(".select2-results__option[role=option]")
    expect(page.locator(".select2-results__option.loading-results")).to_have_count(0)
    return options


def test_an_admin_grants_a_role_on_a_pool_found_by_name_and_the_user_sees_the_pool(
    new_page, make_user, make_pool
):
    admin = make_user("operator", superuser=True)
    student = make_user("student")
    pool = make_pool(name="classroom-7")
    make_pool(name="staff-only")
    console = new_page()
    log_in_to_console(console, admin)

    console.goto("/admin/project/usergrant/add/")
    console.locator("#id_user").select_option(label=student.username)
    console.locator("#id_role").select_option(label="User role")
    options = search_picker(console, "classroom")
    expect(options).to_have_text([f"VM pool: {pool.name}"])
    options.first.click()
    console.locator('input[name="_save"]').click()

    expect(console.locator("ul.messagelist")).to_contain_text("was added successfully")
    assert holds(student, "pools.allocate_vmpool", pool)
    portal = new_page()
    log_in(portal, student)
    expect(portal.locator("section.card.pool")).to_have_count(1)
    expect(portal.locator(f'section.card.pool[data-pool="{pool.name}"]')).to_be_visible()


def test_the_picker_offers_a_cluster_admin_only_the_objects_of_their_cluster(
    page, make_user, grant, make_cluster, make_pool
):
    mine, other = make_cluster("cluster-mine"), make_cluster("cluster-other")
    make_pool(mine, name="lab-mine")
    make_pool(other, name="lab-other")
    delegate = make_user("delegate", is_staff=True)
    grant(delegate, "ClusterAdmin", mine)
    log_in_to_console(page, delegate)

    page.goto("/admin/project/usergrant/add/")
    options = search_picker(page, "")

    expect(options).to_have_text(["Cluster: cluster-mine", "VM pool: lab-mine"])


def test_the_grant_list_filters_only_by_the_kinds_of_object_one_grants_on(page, make_user):
    admin = make_user("operator", superuser=True)
    log_in_to_console(page, admin)

    page.goto("/admin/project/usergrant/")
    filter_choices = page.locator("#changelist-filter li a")

    expect(filter_choices).to_have_text(
        ["All", "System", "Cluster", "VM pool", "Lease", "Virtual machine"]
    )


def test_the_confirmation_of_a_grant_names_the_role_as_people_say_it(page, make_user):
    admin = make_user("operator", superuser=True)
    student = make_user("student")
    log_in_to_console(page, admin)

    page.goto("/admin/project/usergrant/add/")
    page.locator("#id_user").select_option(label=student.username)
    page.locator("#id_role").select_option(label="Lease user")
    search_picker(page, "system").first.click()
    page.locator('input[name="_save"]').click()

    message = page.locator("ul.messagelist")
    expect(message).to_contain_text("Lease user for student on the whole system")
    expect(message).not_to_contain_text("role_leaseuser")
    # The list the admin lands on names the role the same way.
    row = page.locator("#result_list tbody tr", has_text="student")
    expect(row.locator(".field-role_name")).to_have_text("Lease user")
