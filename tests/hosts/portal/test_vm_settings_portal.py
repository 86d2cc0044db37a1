"""A VM's settings in the portal: who may make it highly available from its page, and what
bad input and forbidden requests get."""

from __future__ import annotations

import pytest

from hosts.models import VirtualMachine, VmStatus
from project.models import Event, EventKind
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


def _highly_available(vm) -> bool:
    return VirtualMachine.objects.get(pk=vm.pk).highly_available


@pytest.fixture
def vm(make_vm):
    return make_vm(status=VmStatus.UP)


@pytest.fixture
def manager(vm, make_user, grant):
    """A user who may change the VM (UserVmManager on it, as its creator is)."""
    user = make_user()
    grant(user, "UserVmManager", vm)
    return user


def test_a_user_who_may_change_a_vm_makes_it_highly_available_from_its_page(vm, manager):
    client = signed_in(manager)
    before = client.get(f"/vms/{vm.pk}/").content.decode()

    response = client.post(f"/vms/{vm.pk}/settings/", {"highly_available": "on"}, follow=True)

    assert 'id="vm-settings-form"' in before and 'data-highly-available="0"' in before
    assert response.redirect_chain == [(f"/vms/{vm.pk}/", 302)]
    assert messages_of(response) == [
        f"VM {vm.name} is highly available: it is restarted on another host if its host is "
        "confirmed down."
    ]
    assert _highly_available(vm) is True
    assert 'data-highly-available="1"' in response.content.decode()
    assert Event.objects.filter(
        kind=EventKind.CHANGED,
        object_type="vm",
        object_id=vm.pk,
        message__startswith=f"VM {vm.name} was made highly available by {manager.username}",
    ).exists()


def test_turning_high_availability_off_is_kept_and_shown(vm, manager):
    VirtualMachine.objects.filter(pk=vm.pk).update(highly_available=True)

    response = signed_in(manager).post(
        f"/vms/{vm.pk}/settings/", {"highly_available": "off"}, follow=True
    )

    assert messages_of(response) == [f"VM {vm.name} is no longer highly available."]
    assert _highly_available(vm) is False
    assert 'data-highly-available="0"' in response.content.decode()


@pytest.mark.parametrize("answer", [{"highly_available": "maybe"}, {}])
def test_a_settings_form_without_a_valid_answer_shows_the_error_and_changes_nothing(
    vm, manager, answer
):
    VirtualMachine.objects.filter(pk=vm.pk).update(highly_available=True)

    response = signed_in(manager).post(f"/vms/{vm.pk}/settings/", answer)

    assert response.status_code == 400
    form = response.context["settings_form"]
    assert form.errors["highly_available"]
    page = response.content.decode()
    assert 'class="errorlist' in page and 'id="vm-settings-form"' in page
    assert _highly_available(vm) is True
    assert not Event.objects.filter(object_type="vm", object_id=vm.pk).exists()


@pytest.mark.parametrize(
    "role, permissions",
    [
        ("VmViewer", ["hosts.view_virtualmachine"]),
        ("UserRole", None),  # may use (operate) the VM, but not change it
    ],
)
def test_a_user_who_may_not_change_the_vm_sees_the_setting_but_cannot_change_it(
    vm, make_user, make_role, grant, role, permissions
):
    if permissions is not None:
        make_role(role, permissions)
    user = make_user()
    grant(user, role, vm)
    client = signed_in(user)

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    response = client.post(f"/vms/{vm.pk}/settings/", {"highly_available": "on"}, follow=True)

    assert 'data-highly-available="0"' in page
    assert 'id="vm-settings-form"' not in page
    assert messages_of(response) == [f"You may look at VM {vm.name} but not change it."]
    assert _highly_available(vm) is False


def test_a_user_who_cannot_see_the_vm_gets_404_and_changes_nothing(vm, make_user):
    stranger = signed_in(make_user())

    response = stranger.post(f"/vms/{vm.pk}/settings/", {"highly_available": "on"})

    assert response.status_code == 404
    assert _highly_available(vm) is False


def test_the_settings_page_takes_no_get(vm, manager):
    assert signed_in(manager).get(f"/vms/{vm.pk}/settings/").status_code == 405
