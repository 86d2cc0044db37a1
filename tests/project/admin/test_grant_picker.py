"""The grant screens' object picker on the server: it answers only with objects the admin may
grant on, and a grant form naming anything else is refused with a form message."""

from __future__ import annotations

import pytest
from django.urls import reverse

from project.access.permissions import holds
from project.models import Role, UserGrant
from tests.project.admin.fixtures import admin_url, logged_in

pytestmark = pytest.mark.django_db


def picker() -> str:
    return reverse("admin:project_usergrant_objects")


def offered(response) -> list[str]:
    assert response.status_code == 200
    return [child["text"] for group in response.json()["results"] for child in group["children"]]


def object_errors(response) -> list[str]:
    assert response.status_code == 200, response.get("Location")
    return response.context["adminform"].form.errors["object"]


@pytest.fixture
def pools_of_a_and_b(make_pool, cluster_a, cluster_b):
    return make_pool(cluster_a, name="pool-a"), make_pool(cluster_b, name="pool-b")


@pytest.fixture
def student(make_user):
    return make_user("student")


def grant_form(student, role: str, on: str) -> dict:
    return {"user": student.pk, "role": Role.objects.get(name=role).pk, "object": on}


def test_the_picker_finds_objects_by_name_grouped_by_kind(superuser_console, pools_of_a_and_b):
    response = superuser_console.get(picker(), {"term": "-a"})

    pool_a, _ = pools_of_a_and_b
    assert response.json()["results"] == [
        {
            "text": "Clusters",
            "children": [{"id": f"cluster:{pool_a.cluster_id}", "text": "Cluster: cluster-a"}],
        },
        {"text": "VM pools", "children": [{"id": f"pool:{pool_a.pk}", "text": "VM pool: pool-a"}]},
    ]


def test_the_picker_offers_a_cluster_admin_nothing_of_another_cluster(
    console_of_a, pools_of_a_and_b
):
    response = console_of_a.get(picker(), {"term": "pool"})

    assert offered(response) == ["VM pool: pool-a"]


def test_the_picker_is_refused_to_staff_who_may_not_grant(make_user, pools_of_a_and_b):
    staff = logged_in(make_user("clerk", is_staff=True))

    response = staff.get(picker(), {"term": "pool"})

    assert response.status_code == 403


def test_a_grant_on_a_pool_of_another_cluster_is_a_form_error(
    console_of_a, pools_of_a_and_b, student
):
    _, pool_b = pools_of_a_and_b

    response = console_of_a.post(
        admin_url("project.UserGrant", "add"), grant_form(student, "UserRole", f"pool:{pool_b.pk}")
    )

    assert object_errors(response) == ["There is no such VM pool you may grant on."]
    assert not holds(student, "pools.allocate_vmpool", pool_b)


def test_a_grant_on_a_missing_pool_is_a_form_error(superuser_console, student):
    response = superuser_console.post(
        admin_url("project.UserGrant", "add"), grant_form(student, "UserRole", "pool:987654")
    )

    assert object_errors(response) == ["There is no such VM pool you may grant on."]


def test_a_grant_on_a_kind_of_object_that_takes_no_roles_is_a_form_error(
    superuser_console, make_host, student
):
    host = make_host()

    response = superuser_console.post(
        admin_url("project.UserGrant", "add"), grant_form(student, "UserRole", f"host:{host.pk}")
    )

    assert object_errors(response) == [
        "Choose an object to grant on: system, cluster, VM pool, lease, virtual machine."
    ]
    assert not UserGrant.objects.exists()


def test_a_role_with_actions_the_admin_does_not_hold_is_a_form_error(
    console_of_a, pools_of_a_and_b, student
):
    pool_a, _ = pools_of_a_and_b

    response = console_of_a.post(
        admin_url("project.UserGrant", "add"), grant_form(student, "SuperUser", f"pool:{pool_a.pk}")
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["role"] == [
        "You may only grant roles whose actions you hold here; SuperUser has actions you do not."
    ]
