"""Images made from VMs through the API (``POST /api/vms/{id}/image/``) on simulated hosts:
the answer is the job and the image, saving; the job makes it ready, live when the guest has
an agent, else with the VM shut down and started again; refusals leave nothing behind."""

import pytest

from hosts import jobs
from hosts.models import (
    Image,
    ImageMember,
    Job,
    JobKind,
    JobState,
    Quota,
    Template,
    VirtualMachine,
)
from hosts.operations import OPERATION_BY_KIND

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1024**3


@pytest.fixture
def holder(make_user, grant, client_for):
    """vm -> (user, client) of a user holding the VM (its owner, UserRole on it)."""

    def hold(vm):
        user = make_user()
        VirtualMachine.objects.filter(pk=vm.pk).update(owner=user)
        grant(user, "UserRole", vm)
        return user, client_for(user)

    return hold


@pytest.fixture
def agent_vm(running_vm, small_template):
    """A running VM of 2 GiB of disk whose template has the guest agent."""
    Template.objects.filter(pk=small_template.pk).update(guest_agent=True)
    return running_vm(disk_gb=2)


def _ask(client, vm, **body):
    return client.post(f"/api/vms/{vm.pk}/image/", body, format="json")


def _run(job_id: int) -> dict:
    jobs.run(job_id, OPERATION_BY_KIND)
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.SUCCEEDED, (job.error_code, job.error_message)
    return job.result


def test_a_running_vm_with_an_agent_is_imaged_live_into_a_private_image_of_its_holder(
    agent_vm, holder, image_store
):
    user, client = holder(agent_vm)

    answer = _ask(client, agent_vm, name="my-snap", description="before the upgrade")

    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert (body["kind"], body["state"], body["vm"]) == ("image_from_vm", "pending", agent_vm.pk)
    image = body["image"]
    assert (image["name"], image["status"], image["visibility"]) == ("my-snap", "saving", "private")
    assert (image["owner"], image["description"]) == (user.pk, "before the upgrade")
    assert body["params"] == {"image": image["id"]}

    result = _run(body["id"])

    shown = client.get(f"/api/images/{image['id']}/").json()
    assert (shown["status"], shown["format"], shown["kind"]) == ("ready", "qcow2", "disk")
    assert shown["virtual_size_bytes"] == 2 * GIB  # the VM's disk
    stored = Image.objects.get(pk=image["id"])
    assert (image_store / stored.file).stat().st_size == shown["size_bytes"] > 0
    assert (result["live"], result["stopped_for_copy"]) == (True, False)
    assert client.get(f"/api/vms/{agent_vm.pk}/").json()["status"] == "up"
    assert client.get("/api/me/quota/").json()["images"]["used"] == 1


def test_a_running_vm_without_an_agent_is_shut_down_for_the_copy_and_started_again(
    running_vm, holder, image_store
):
    vm = running_vm()
    _user, client = holder(vm)

    answer = _ask(client, vm, name="cold-copy")
    result = _run(answer.json()["id"])

    job = client.get(f"/api/jobs/{answer.json()['id']}/").json()
    lines = [line["message"] for line in job["journal"]]
    assert any("shut down for the copy and started again after" in line for line in lines)
    assert any(line.startswith("Starting the VM again on") for line in lines)
    assert (result["live"], result["stopped_for_copy"]) == (False, True)
    assert client.get(f"/api/vms/{vm.pk}/").json()["status"] == "up"
    assert Image.objects.get(name="cold-copy").status == "ready"


def test_an_image_being_saved_is_shown_but_boots_nothing_until_it_is_ready(
    agent_vm, holder, admin_user, client_for, image_store
):
    _user, client = holder(agent_vm)
    image_id = _ask(client, agent_vm, name="not-yet").json()["image"]["id"]
    Image.objects.filter(pk=image_id).update(visibility="public")
    template = {"name": "from-snap", "vcpus": 1, "memory_mb": 128, "disk_gb": 2}

    refused = client_for(admin_user).post(
        "/api/templates/", {**template, "disk_image": image_id}, format="json"
    )

    assert refused.status_code == 400
    assert refused.json() == {
        "disk_image": ["Image not-yet is still being made from a VM; use it once it is ready."]
    }
    assert client.get(f"/api/images/{image_id}/").json()["status"] == "saving"


def test_a_cancelled_image_job_leaves_no_image(agent_vm, holder, image_store):
    _user, client = holder(agent_vm)
    answer = _ask(client, agent_vm, name="changed-my-mind").json()

    cancelled = client.post(f"/api/jobs/{answer['id']}/cancel/")

    assert cancelled.status_code == 200, cancelled.content
    assert not Image.objects.filter(pk=answer["image"]["id"]).exists()
    assert client.get(f"/api/images/{answer['image']['id']}/").status_code == 404


def test_past_the_image_quota_it_is_a_409_and_nothing_is_made(agent_vm, holder, image_store):
    _user, client = holder(agent_vm)
    Quota.objects.create(images=1)
    assert _ask(client, agent_vm, name="first").status_code == 202

    refused = _ask(client, agent_vm, name="second")

    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "Quota exceeded for images: requested 1, but already used 1 of 1.",
        "code": "quota_exceeded",
        "resource": "images",
        "limit": 1,
        "used": 1,
        "requested": 1,
    }
    assert list(Image.objects.values_list("name", flat=True)) == ["first"]
    assert Job.objects.filter(kind=JobKind.IMAGE_FROM_VM).count() == 1


def test_with_no_image_storage_left_it_is_a_409_before_anything_is_copied(
    agent_vm, holder, image_store
):
    _user, client = holder(agent_vm)
    Quota.objects.create(image_gb=0)

    refused = _ask(client, agent_vm, name="no-room-for-me")

    assert refused.status_code == 409
    assert refused.json()["resource"] == "image_gb"
    assert not Image.objects.exists()
    assert not Job.objects.filter(kind=JobKind.IMAGE_FROM_VM).exists()


def test_a_copy_bigger_than_the_storage_left_fails_its_job_and_keeps_nothing(
    agent_vm, holder, make_image, image_store
):
    user, client = holder(agent_vm)
    Quota.objects.create(image_gb=1)
    older = make_image(name="older")
    Image.objects.filter(pk=older.pk).update(owner=user, size_bytes=GIB - 1000)
    answer = _ask(client, agent_vm, name="one-too-many").json()

    jobs.run(answer["id"], OPERATION_BY_KIND)

    job = client.get(f"/api/jobs/{answer['id']}/").json()
    assert job["state"] == "failed"
    assert job["error"]["code"] == "quota_exceeded"
    assert job["error"]["message"].startswith("Quota exceeded for image storage: requested")
    assert list(Image.objects.values_list("name", flat=True)) == ["older"]
    assert sorted(path.name for path in image_store.iterdir()) == [older.file]
    assert client.get(f"/api/vms/{agent_vm.pk}/").json()["status"] == "up"


def test_someone_elses_vm_is_a_404_even_to_who_may_see_it(
    agent_vm, holder, make_user, make_role, grant, client_for, image_store
):
    holder(agent_vm)
    stranger, viewer = make_user(), make_user()
    grant(viewer, make_role("VmLooker", ["hosts.view_virtualmachine"]).name, agent_vm)

    for user in (stranger, viewer):
        answer = _ask(client_for(user), agent_vm, name=f"not-{user.pk}")
        assert answer.status_code == 404, (user, answer.content)
    assert client_for(viewer).get(f"/api/vms/{agent_vm.pk}/").status_code == 200
    assert not Image.objects.exists()


def test_a_bad_or_taken_name_is_a_400_on_the_name(agent_vm, holder, make_image, image_store):
    _user, client = holder(agent_vm)
    make_image(name="taken")

    bad = _ask(client, agent_vm, name="no spaces here")
    taken = _ask(client, agent_vm, name="taken")
    missing = _ask(client, agent_vm)

    assert bad.status_code == 400 and list(bad.json()) == ["name"]
    assert taken.status_code == 400
    assert taken.json() == {"name": ["An image with this name exists already."]}
    assert missing.status_code == 400 and list(missing.json()) == ["name"]
    assert list(Image.objects.values_list("name", flat=True)) == ["taken"]


def test_only_admins_make_it_public_and_a_paused_vm_is_a_409(agent_vm, holder, image_store):
    _user, client = holder(agent_vm)

    public = _ask(client, agent_vm, name="for-all", visibility="public")
    VirtualMachine.objects.filter(pk=agent_vm.pk).update(status="paused")
    paused = _ask(client, agent_vm, name="paused-copy")

    assert public.status_code == 400
    assert public.json() == {"visibility": ["Only admins make an image public or take it back."]}
    assert paused.status_code == 409
    assert paused.json() == {
        "detail": f"VM {agent_vm.name} is Paused; an image is made of a VM that is running or "
        "shut down."
    }
    assert not Image.objects.exists() and not ImageMember.objects.exists()


def test_an_image_deleted_while_it_is_saved_fails_its_job_and_leaves_no_file(
    agent_vm, holder, image_store
):
    _user, client = holder(agent_vm)
    answer = _ask(client, agent_vm, name="short-lived").json()

    deleted = client.delete(f"/api/images/{answer['image']['id']}/")
    jobs.run(answer["id"], OPERATION_BY_KIND)

    assert deleted.status_code == 204
    job = client.get(f"/api/jobs/{answer['id']}/").json()
    assert (job["state"], job["error"]["code"]) == ("failed", "image_deleted")
    assert list(image_store.iterdir() if image_store.exists() else []) == []
    assert client.get(f"/api/vms/{agent_vm.pk}/").json()["status"] == "up"
