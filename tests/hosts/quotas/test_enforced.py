"""Quotas enforced where VMs are made or taken: creating a VM through the API and taking a
pool's VM (API and portal). Over a limit the answer is a 409 naming the resource, the limit
and the use, or a message in the portal; nothing is made or taken."""

import pytest

from hosts.models import Quota, VirtualMachine
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def power_user(make_user, make_cluster, grant):
    """(user, cluster): a user who may create VMs in the cluster, limited to 8 vCPUs."""
    user, cluster = make_user(), make_cluster()
    grant(user, "PowerUser", cluster)
    Quota.objects.create(vcpus=8)
    return user, cluster


def _create(client, cluster, template, name: str):
    return client.post(
        "/api/vms/",
        {"name": name, "cluster": cluster.pk, "template": template.pk},
        format="json",
    )


def test_creating_a_vm_past_the_vcpu_limit_is_a_409_and_makes_nothing(
    power_user, client_for, make_template
):
    user, cluster = power_user
    template = make_template(vcpus=4, memory_mb=512, disk_gb=1)
    client = client_for(user)
    assert _create(client, cluster, template, "a").status_code == 201
    assert _create(client, cluster, template, "b").status_code == 201

    refused = _create(client, cluster, template, "c")

    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "Quota exceeded for vCPUs: requested 4, but already used 8 of 8.",
        "code": "quota_exceeded",
        "resource": "vcpus",
        "limit": 8,
        "used": 8,
        "requested": 4,
    }
    assert sorted(VirtualMachine.objects.values_list("name", flat=True)) == ["a", "b"]


def test_a_user_given_more_by_their_own_quota_may_create_more(
    power_user, client_for, make_template
):
    user, cluster = power_user
    Quota.objects.create(user=user, vcpus=12)
    template = make_template(vcpus=4, memory_mb=512, disk_gb=1)
    client = client_for(user)

    answers = [_create(client, cluster, template, name).status_code for name in "abcd"]

    assert answers == [201, 201, 201, 409]


def test_a_superuser_is_not_limited(admin_user, client_for, make_cluster, make_template):
    Quota.objects.create(vms=0)

    response = _create(client_for(admin_user), make_cluster(), make_template(), "free")

    assert response.status_code == 201, response.json()


def test_taking_a_pool_vm_past_the_vm_limit_is_a_409_and_takes_nothing(
    pool_of, pool_user, make_vm, client_for
):
    Quota.objects.create(vms=2)
    pool = pool_of(up=2, max_user_vms=5)
    user = pool_user(pool)
    make_vm(owner=user)  # made earlier, counted with what they take
    client = client_for(user)
    assert client.post(f"/api/vmpools/{pool.pk}/allocatevm/").status_code == 200

    refused = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")

    assert refused.status_code == 409
    body = refused.json()
    assert (body["code"], body["resource"], body["limit"], body["used"]) == (
        "quota_exceeded",
        "vms",
        2,
        2,
    )
    assert body["detail"] == "Quota exceeded for VMs: requested 1, but already used 2 of 2."
    assert VirtualMachine.objects.filter(pool=pool, owner=user).count() == 1


def test_a_returned_pool_vm_no_longer_counts(pool_of, pool_user, client_for):
    Quota.objects.create(vms=1)
    pool = pool_of(up=2, max_user_vms=5)
    user = pool_user(pool)
    client = client_for(user)
    taken = client.post(f"/api/vmpools/{pool.pk}/allocatevm/").json()["vm"]["id"]

    client.post(f"/api/vms/{taken}/return/")
    again = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")

    assert again.status_code == 200, again.json()


def test_the_portal_says_the_quota_refusal_and_takes_nothing(pool_of, pool_user, make_vm):
    Quota.objects.create(memory_mb=256)
    pool = pool_of(up=1)
    user = pool_user(pool)
    make_vm(owner=user, memory_mb=200)

    response = signed_in(user).post(f"/pools/{pool.pk}/take/", follow=True)

    assert (
        "Quota exceeded for memory: requested 128 MB, but already used 200 of 256 MB."
        in messages_of(response)
    )
    assert not VirtualMachine.objects.filter(pool=pool, owner=user).exists()


# --- a stopped VM's hardware changed: only what grows counts ---------------------------------


def test_growing_a_vm_past_the_vcpu_limit_is_a_409_and_changes_nothing(
    power_user, client_for, make_template
):
    user, cluster = power_user
    client = client_for(user)
    made = _create(client, cluster, make_template(vcpus=4, memory_mb=512, disk_gb=1), "grow")
    url = f"/api/vms/{made.json()['id']}/"

    refused = client.patch(url, {"vcpus": 12, "description": "bigger"}, format="json")
    grown = client.patch(url, {"vcpus": 8}, format="json")
    shrunk = client.patch(url, {"vcpus": 2, "memory_mb": 256}, format="json")

    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        "Quota exceeded for vCPUs: requested 8, but already used 4 of 8."
    )
    assert grown.status_code == 200, grown.content
    assert shrunk.status_code == 200, shrunk.content
    vm = VirtualMachine.objects.get(name="grow")
    assert (vm.vcpus, vm.memory_mb, vm.description) == (2, 256, "")


def _admin_form(vm_or_none, cluster, template, **values) -> dict:
    return {
        "name": vm_or_none.name if vm_or_none else "made-in-admin",
        "description": "",
        "cluster": cluster.pk,
        "template": template.pk,
        "vcpus": 4,
        "memory_mb": 512,
        "disk_gb": 1,
        "pinned_host": "",
        **values,
    }


def test_the_admin_says_the_quota_on_the_field_when_a_vm_is_added_or_grown(
    power_user, make_template, make_user, grant
):
    from django.test import Client

    user, cluster = power_user
    staff = make_user(is_staff=True)
    grant(staff, "PowerUser", cluster)
    template = make_template(vcpus=4, memory_mb=512, disk_gb=1)
    console = Client()
    console.force_login(staff)

    added = console.post("/admin/hosts/virtualmachine/add/", _admin_form(None, cluster, template))
    too_many = console.post(
        "/admin/hosts/virtualmachine/add/",
        _admin_form(None, cluster, template, name="second", vcpus=6),
    )
    vm = VirtualMachine.objects.get(name="made-in-admin")
    grown = console.post(
        f"/admin/hosts/virtualmachine/{vm.pk}/change/",
        _admin_form(vm, cluster, template, vcpus=9),
    )

    assert added.status_code == 302, added.content.decode()[-2000:]
    message = "Quota exceeded for vCPUs: requested {}, but already used 4 of 8."
    assert too_many.status_code == 200
    assert too_many.context["adminform"].form.errors["vcpus"] == [message.format(6)]
    assert grown.status_code == 200
    assert grown.context["adminform"].form.errors["vcpus"] == [message.format(5)]
    assert list(VirtualMachine.objects.values_list("name", "vcpus")) == [("made-in-admin", 4)]
