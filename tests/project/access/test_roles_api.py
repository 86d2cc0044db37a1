"""/api/roles/: everyone reads roles; role managers make custom ones; built-ins are locked."""

import pytest

from project.access.roles import BUILTIN_ROLES
from project.models import Role
from tests.project.access.conftest import grant_count

URL = "/api/roles/"


def role_url(name: str) -> str:
    return f"{URL}{Role.objects.get(name=name).pk}/"


@pytest.fixture
def superuser_client(admin_user, client_for):
    return client_for(admin_user)


@pytest.fixture
def vm_viewer(superuser_client):
    """A custom role, made through the API, that may look at VMs and nothing else."""
    response = superuser_client.post(
        URL, {"name": "VmViewer", "actions": ["hosts.view_virtualmachine"]}
    )
    assert response.status_code == 201, response.content
    return response.json()


# Reading.


def test_any_user_lists_the_builtin_roles(make_user, client_for):
    response = client_for(make_user()).get(URL, {"limit": 100})

    assert response.status_code == 200
    names = {row["name"] for row in response.json()["results"]}
    assert names >= set(BUILTIN_ROLES)


def test_role_shows_its_actions(make_user, client_for):
    response = client_for(make_user()).get(role_url("UserRole"))

    assert response.status_code == 200
    assert response.json()["builtin"] is True
    assert response.json()["actions"] == sorted(BUILTIN_ROLES["UserRole"]["actions"])
    assert "hosts.operate_virtualmachine" in response.json()["actions"]


def test_actions_endpoint_lists_every_grantable_action(make_user, client_for):
    response = client_for(make_user()).get(f"{URL}actions/")

    assert response.status_code == 200
    names = [row["name"] for row in response.json()]
    assert {"hosts.view_virtualmachine", "project.manage_grants", "auth.add_user"} <= set(names)
    assert not [name for name in names if ".role_" in name]
    assert all(row["description"] for row in response.json())


def test_role_list_queries_do_not_grow_with_the_roles(
    make_user, make_role, client_for, django_assert_max_num_queries
):
    for number in range(20):
        make_role(f"Custom{number}", ["hosts.view_cluster", "hosts.view_host"])
    client = client_for(make_user())

    with django_assert_max_num_queries(8):
        response = client.get(URL, {"limit": 100})

    assert response.json()["count"] == len(BUILTIN_ROLES) + 20


# Built-in roles are locked.


@pytest.mark.parametrize(
    "method, body",
    [
        ("patch", {"description": "Mine now."}),
        ("put", {"name": "UserRole", "description": "", "actions": []}),
        ("delete", None),
    ],
    ids=["patch", "put", "delete"],
)
def test_builtin_role_cannot_be_changed_or_deleted_even_by_a_superuser(
    method, body, superuser_client
):
    before = set(Role.objects.get(name="UserRole").actions.values_list("codename", flat=True))

    response = getattr(superuser_client, method)(role_url("UserRole"), body)

    assert response.status_code == 403
    role = Role.objects.get(name="UserRole")
    assert set(role.actions.values_list("codename", flat=True)) == before
    assert role.description == BUILTIN_ROLES["UserRole"]["description"]


# Custom roles.


def test_superuser_creates_a_custom_role(vm_viewer):
    assert vm_viewer["name"] == "VmViewer"
    assert vm_viewer["builtin"] is False
    assert vm_viewer["actions"] == ["hosts.view_virtualmachine"]


def test_system_superuser_role_may_create_roles(caller, client_for):
    manager = caller("SuperUser")

    response = client_for(manager).post(URL, {"name": "Mine", "actions": []})

    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "role, scope", [(None, None), ("ClusterAdmin", "system"), ("SuperUser", "cluster")]
)
def test_caller_without_manage_roles_on_the_system_cannot_create_roles(
    role, scope, caller, home, client_for
):
    user = caller(role, home.scope(scope)) if role else caller()

    response = client_for(user).post(URL, {"name": "Sneaky", "actions": ["auth.add_user"]})

    assert response.status_code == 403
    assert not Role.objects.filter(name="Sneaky").exists()


def test_custom_role_granted_on_a_vm_shows_it_but_does_not_allow_changes(
    vm_viewer, home, caller, client_for
):
    user = caller("VmViewer", home.vm)
    client = client_for(user)

    seen = client.get(f"/api/vms/{home.vm.pk}/")
    patched = client.patch(f"/api/vms/{home.vm.pk}/", {"description": "Mine."})
    deleted = client.delete(f"/api/vms/{home.vm.pk}/")

    assert seen.status_code == 200
    assert (patched.status_code, deleted.status_code) == (403, 403)
    home.vm.refresh_from_db()
    assert home.vm.description == ""


def test_custom_role_granted_on_a_cluster_covers_its_vms_only(
    vm_viewer, home, away, caller, client_for
):
    vm, elsewhere = home.vm, away.vm
    user = caller("VmViewer", home.cluster)

    response = client_for(user).get("/api/vms/")

    assert [row["id"] for row in response.json()["results"]] == [vm.pk]
    assert client_for(user).get(f"/api/clusters/{home.cluster.pk}/").status_code == 404
    assert client_for(user).get(f"/api/vms/{elsewhere.pk}/").status_code == 404


def test_changing_a_custom_roles_actions_changes_what_its_grants_allow(
    vm_viewer, home, caller, superuser_client, client_for
):
    user = caller("VmViewer", home.vm)
    actions = ["hosts.view_virtualmachine", "hosts.change_virtualmachine"]

    changed = superuser_client.patch(role_url("VmViewer"), {"actions": actions})
    patched = client_for(user).patch(f"/api/vms/{home.vm.pk}/", {"description": "Mine."})

    assert changed.status_code == 200, changed.content
    assert changed.json()["actions"] == sorted(actions)
    assert patched.status_code == 200


def test_custom_role_description_can_be_changed(vm_viewer, superuser_client):
    response = superuser_client.patch(role_url("VmViewer"), {"description": "Looks at VMs."})

    assert response.status_code == 200, response.content
    assert Role.objects.get(name="VmViewer").description == "Looks at VMs."


def test_custom_role_with_an_unknown_action_is_refused(superuser_client):
    response = superuser_client.post(
        URL, {"name": "Odd", "actions": ["hosts.view_virtualmachine", "hosts.fly_to_moon"]}
    )

    assert response.status_code == 400
    assert "hosts.fly_to_moon" in " ".join(response.json()["actions"])
    assert not Role.objects.filter(name="Odd").exists()


def test_role_grant_permission_is_not_an_action(superuser_client, vm_viewer):
    response = superuser_client.post(URL, {"name": "Wrapper", "actions": ["hosts.role_vmviewer"]})

    assert response.status_code == 400
    assert "actions" in response.json()


@pytest.mark.parametrize("name", ["VmViewer", "vmviewer", "VMVIEWER", "ClusterAdmin"])
def test_role_name_already_taken_in_any_case_is_refused(name, vm_viewer, superuser_client):
    count = Role.objects.count()

    response = superuser_client.post(URL, {"name": name, "actions": []})

    assert response.status_code == 400
    assert response.json()["name"]
    assert Role.objects.count() == count


@pytest.mark.parametrize("name", ["", "9lives", "has space", "dash-ed", "x" * 51])
def test_invalid_role_name_is_refused(name, superuser_client):
    response = superuser_client.post(URL, {"name": name, "actions": []})

    assert response.status_code == 400
    assert response.json()["name"]


def test_custom_role_cannot_be_renamed(vm_viewer, superuser_client):
    response = superuser_client.patch(role_url("VmViewer"), {"name": "VmWatcher"})

    assert response.status_code == 400
    assert response.json() == {"name": ["A role cannot be renamed; create a new one."]}
    assert Role.objects.filter(name="VmViewer").exists()


def test_non_admin_cannot_change_or_delete_a_custom_role(vm_viewer, make_user, client_for):
    client = client_for(make_user())

    patched = client.patch(role_url("VmViewer"), {"actions": ["auth.add_user"]})
    deleted = client.delete(role_url("VmViewer"))

    assert (patched.status_code, deleted.status_code) == (403, 403)
    assert vm_viewer["actions"] == client.get(role_url("VmViewer")).json()["actions"]


def test_deleting_a_custom_role_removes_its_grants(
    vm_viewer, home, caller, superuser_client, client_for
):
    user = caller("VmViewer", home.vm)
    assert client_for(user).get(f"/api/vms/{home.vm.pk}/").status_code == 200

    response = superuser_client.delete(role_url("VmViewer"))

    assert response.status_code == 204
    assert grant_count() == 0
    assert client_for(user).get(f"/api/vms/{home.vm.pk}/").status_code == 404


def test_role_of_the_same_name_made_again_does_not_revive_old_grants(
    vm_viewer, home, caller, superuser_client, client_for
):
    user = caller("VmViewer", home.vm)
    superuser_client.delete(role_url("VmViewer"))

    again = superuser_client.post(
        URL, {"name": "VmViewer", "actions": ["hosts.view_virtualmachine"]}
    )

    assert again.status_code == 201
    assert client_for(user).get(f"/api/vms/{home.vm.pk}/").status_code == 404
