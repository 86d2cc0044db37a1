"""Roles and grants in the admin console: a role goes by one name everywhere (its name in
words), and a grant's own page says which role it holds and on what."""

from __future__ import annotations

import re

import pytest

from project.models import Role, UserGrant
from tests.project.admin.fixtures import admin_url, shown_fields

pytestmark = pytest.mark.django_db


def role_options(html: str) -> list[str]:
    select = re.search(r'<select name="role".*?</select>', html, re.DOTALL).group(0)
    return [label for value, label in re.findall(r'<option value="(\d*)"[^>]*>([^<]*)<', select)]


def test_a_role_goes_by_its_name_in_words_in_the_grant_form_the_grants_and_the_roles(
    superuser_console, make_user, grant, make_pool, cluster_a
):
    grant(make_user("student"), "UserRole", make_pool(cluster_a, name="pool-a"))

    form = superuser_console.get(admin_url("project.UserGrant", "add")).content.decode()
    grants = superuser_console.get(admin_url("project.UserGrant", "changelist"))
    roles = superuser_console.get(admin_url("project.Role", "changelist"))

    assert "User role" in role_options(form) and "UserRole" not in role_options(form)
    row = grants.content.decode().split('<th class="field-role_name">', 1)[1].split("</tr>")[0]
    assert ">User role</a></th>" in row and '<td class="field-object_type">VM pool</td>' in row
    assert '<th class="field-role"><a href="' in roles.content.decode()
    assert ">User role</a></th>" in roles.content.decode()
    assert "UserRole" not in grants.content.decode() + roles.content.decode()


def test_a_grants_page_says_which_role_it_holds_and_on_what(
    superuser_console, make_user, grant, make_pool, cluster_a
):
    grant(make_user("student"), "UserRole", make_pool(cluster_a, name="pool-a"))
    row = UserGrant.objects.get(user__username="student")

    response = superuser_console.get(admin_url("project.UserGrant", "change", row.pk))

    shown = shown_fields(response)
    assert (shown["Role"], shown["On"]) == ("User role", "VM pool: pool-a")
    assert "User role for student on VM pool pool-a" in response.content.decode()


def test_a_roles_page_names_it_in_words_and_gives_its_name_in_the_api(superuser_console):
    role = Role.objects.get(name="UserVmManager")

    response = superuser_console.get(admin_url("project.Role", "change", role.pk))

    assert "<title>User VM manager | View role | Corral</title>" in response.content.decode()
    assert shown_fields(response)["Name in the API"] == "UserVmManager"
