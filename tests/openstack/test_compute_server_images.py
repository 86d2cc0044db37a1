"""Nova's ``createImage`` on simulated hosts: 202 with the image's URL in ``Location``, the
image saving in Glance (its name and metadata as given, Nova's snapshot properties) until
Corral's job has made it, then active and bootable; refusals in Nova's words, nothing made."""

from __future__ import annotations

import pytest

from hosts.models import Image, Job, JobKind, JobState, Quota, VirtualMachine, VmStatus
from tests.openstack.test_compute_servers import LATEST, V, create, run_jobs

pytestmark = pytest.mark.django_db
IMAGES = "/image/v2/images"


@pytest.fixture
def launcher(sim_cluster, make_user, make_template, grant):
    """A PowerUser of the simulated cluster and a flavor (template) there: (user, flavor)."""
    user = make_user()
    grant(user, "PowerUser", sim_cluster)
    template = make_template("m1.small", cluster=sim_cluster, vcpus=1, memory_mb=128, disk_gb=1)
    return user, template


@pytest.fixture
def server(launcher, nova_for, image_store):
    """An active server of the launcher's: (user, its Nova client, the server's id)."""
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    run_jobs()
    return user, nova, server_id


def create_image(nova, server_id: str, body: dict):
    return nova.post(
        f"{V}/servers/{server_id}/action", {"createImage": body}, format="json", **LATEST
    )


def test_create_image_answers_where_the_image_is_and_glance_shows_it_saving_then_active(
    server, nova_for
):
    user, nova, server_id = server

    made = create_image(nova, server_id, {"name": "nightly snap", "metadata": {"tier": "web"}})

    assert made.status_code == 202, made.content
    image_id = made["Location"].rsplit("/", 1)[-1]
    assert made["Location"] == f"http://testserver{IMAGES}/{image_id}"
    saving = nova.get(f"{IMAGES}/{image_id}").json()
    assert (saving["name"], saving["status"], saving["visibility"]) == (
        "nightly snap",
        "saving",
        "private",
    )
    assert (saving["tier"], saving["image_type"], saving["instance_uuid"]) == (
        "web",
        "snapshot",
        server_id,
    )
    assert (saving["size"], saving["checksum"], saving["owner"]) == (None, None, str(user.pk))
    assert nova.get(f"{IMAGES}/{image_id}/file").status_code == 204
    imaging = nova.get(f"{V}/servers/{server_id}", **LATEST).json()["server"]
    assert imaging["OS-EXT-STS:task_state"] == "image_snapshot"

    (job,) = run_jobs()

    assert (job.kind, job.state) == (JobKind.IMAGE_FROM_VM, JobState.SUCCEEDED)
    active = nova.get(f"{IMAGES}/{image_id}").json()
    assert (active["status"], active["disk_format"]) == ("active", "qcow2")
    done = nova.get(f"{V}/servers/{server_id}", **LATEST).json()["server"]
    assert (done["status"], done["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert active["size"] == Image.objects.get(uuid=image_id).size_bytes > 0
    booted = create(nova, name="from snap", imageRef=image_id)
    assert booted.status_code == 202, booted.content
    vm = VirtualMachine.objects.get(uuid=booted.json()["server"]["id"])
    assert vm.disk_image.uuid.hex == image_id.replace("-", "")


def test_a_server_cannot_boot_an_image_still_being_saved(server):
    _user, nova, server_id = server
    image_id = create_image(nova, server_id, {"name": "not yet"})["Location"].rsplit("/", 1)[-1]

    refused = create(nova, name="too soon", imageRef=image_id)

    assert refused.status_code == 400
    assert refused.json()["badRequest"]["message"] == (
        f"Invalid input for field/attribute imageRef: Image {image_id} is not active."
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "name: A name of 1 to 255 characters, not only spaces."),
        ({"name": "   "}, "name: A name of 1 to 255 characters, not only spaces."),
        ({"name": "x", "metadata": {"k": 1}}, "metadata: Key 'k': keys and values are 1 to"),
        ({"name": "x", "rotation": 2}, "createImage: Unknown members: rotation."),
    ],
)
def test_a_bad_create_image_body_is_novas_400_and_makes_nothing(server, body, message):
    _user, nova, server_id = server

    refused = create_image(nova, server_id, body)

    assert refused.status_code == 400
    assert refused.json()["badRequest"]["message"].startswith(
        f"Invalid input for field/attribute {message}"
    )
    assert not Image.objects.exists()


def test_another_users_server_is_novas_404_and_over_the_quota_novas_403(
    server, nova_for, make_user
):
    _user, nova, server_id = server

    stranger = create_image(nova_for(make_user()), server_id, {"name": "theirs"})
    Quota.objects.create(images=0)
    over = create_image(nova, server_id, {"name": "one too many"})

    assert stranger.status_code == 404
    assert over.status_code == 403
    assert over.json()["forbidden"]["message"].startswith("Quota exceeded for images: Requested 1")
    assert not Image.objects.exists()
    assert not Job.objects.filter(kind=JobKind.IMAGE_FROM_VM).exists()


def test_a_paused_server_is_novas_409(server):
    _user, nova, server_id = server
    VirtualMachine.objects.filter(uuid=server_id).update(status=VmStatus.PAUSED)

    refused = create_image(nova, server_id, {"name": "paused"})

    assert refused.status_code == 409
    assert refused.json()["conflictingRequest"]["message"].startswith(
        f"Cannot 'createImage' instance {server_id} while it is in vm_state paused:"
    )
    assert not Image.objects.exists()
