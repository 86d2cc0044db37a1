"""Making an image of a VM from its portal page: its holder (or who may operate it) names the
image; its job shows under the VM's jobs with its progress and the image in My images; bad
input and refusals show on the form; others get a 404."""

from __future__ import annotations

import pytest

from hosts import jobs
from hosts.models import Image, Job, JobKind, Quota, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def holder_and_vm(running_vm, make_user, grant):
    """A running VM on a simulated host and the user holding it (its owner, UserRole on it)."""
    vm = running_vm()
    user = make_user()
    VirtualMachine.objects.filter(pk=vm.pk).update(owner=user)
    grant(user, "UserRole", vm)
    return user, vm


def test_the_holder_makes_an_image_and_follows_its_job_on_the_vms_page(holder_and_vm, image_store):
    user, vm = holder_and_vm
    client = signed_in(user)
    assert 'id="vm-image-form"' in client.get(f"/vms/{vm.pk}/").content.decode()

    response = client.post(
        f"/vms/{vm.pk}/image/", {"name": "my-copy", "visibility": "private"}, follow=True
    )

    job = Job.objects.get(kind=JobKind.IMAGE_FROM_VM)
    assert response.redirect_chain == [(f"/vms/{vm.pk}/", 302)]
    assert messages_of(response) == [
        f"Image my-copy of VM {vm.name} is being made (job {job.pk}); it is in My images once "
        "the job is done."
    ]
    page = response.content.decode()
    assert f'id="job-{job.pk}"' in page and "Make an image of its disk" in page
    assert 'data-status="saving"' in client.get("/images/").content.decode()

    jobs.run(job.pk, OPERATION_BY_KIND)

    panel = client.get(f"/vms/{vm.pk}/panel/").content.decode()
    assert f'id="job-{job.pk}" data-job="{job.pk}" data-state="succeeded"' in panel
    listed = client.get("/images/").content.decode()
    assert 'id="image-' in listed and 'data-status="ready"' in listed and "my-copy" in listed


def test_a_bad_name_and_a_quota_refusal_show_on_the_form_and_make_nothing(
    holder_and_vm, image_store
):
    user, vm = holder_and_vm
    client = signed_in(user)
    Quota.objects.create(images=0)

    bad = client.post(f"/vms/{vm.pk}/image/", {"name": "not a name", "visibility": "private"})
    over = client.post(f"/vms/{vm.pk}/image/", {"name": "fine", "visibility": "private"})

    assert bad.status_code == 400 and bad.context["image_form"].errors["name"]
    assert over.status_code == 400
    assert over.context["image_form"].non_field_errors() == [
        "Quota exceeded for images: requested 1, but already used 0 of 0."
    ]
    assert 'id="vm-image-form"' in over.content.decode()
    assert not Image.objects.exists() and not Job.objects.filter(kind=JobKind.IMAGE_FROM_VM)


def test_who_may_only_look_at_the_vm_sees_no_form_and_gets_a_404(
    holder_and_vm, make_user, make_role, grant, image_store
):
    _user, vm = holder_and_vm
    viewer = make_user()
    grant(viewer, make_role("Looker", ["hosts.view_virtualmachine"]).name, vm)
    client = signed_in(viewer)

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    refused = client.post(f"/vms/{vm.pk}/image/", {"name": "theirs", "visibility": "private"})
    stranger = signed_in(make_user()).post(f"/vms/{vm.pk}/image/", {"name": "x"})

    assert 'id="vm-image-form"' not in page
    assert (refused.status_code, stranger.status_code) == (404, 404)
    assert not Image.objects.exists()
