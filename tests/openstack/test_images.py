"""Glance's Image API v2 over HTTP: queue an image, upload its data, read it back, list, change
and delete images, with Corral's permissions and Glance's errors."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid

import pytest
from django.contrib.auth.models import Group

from hosts.models import Image, Quota
from openstack.image.queries import ImageNotActive, ImageNotFound, find_image
from openstack.models import GlanceImage

API = "/image/v2"
PATCH = "application/openstack-images-v2.1-json-patch"
QCOW2_VIRTUAL_SIZE = 32 * 1024 * 1024


@pytest.fixture
def glance_for(blazar_for):
    """glance_for(user) -> an APIClient sending the user's token in X-Auth-Token (Glance's API
    authenticates as Blazar's does)."""
    return blazar_for


@pytest.fixture(scope="module")
def qcow2_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("glance") / "disk.qcow2"
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", str(path), str(QCOW2_VIRTUAL_SIZE)], check=True
    )
    return path.read_bytes()


@pytest.fixture
def uploader(make_user, grant):
    """A user who may add images everywhere (a system-wide cluster admin)."""
    user = make_user("glance-uploader")
    grant(user, "ClusterAdmin")
    return user


def create(client, **fields):
    body = {"disk_format": "qcow2", "container_format": "bare", **fields}
    return client.post(f"{API}/images", body, format="json")


def put_data(client, image_id, data: bytes, content_type="application/octet-stream"):
    return client.put(f"{API}/images/{image_id}/file", data, content_type=content_type)


def stored_files(store) -> list[str]:
    return sorted(path.name for path in store.iterdir()) if store.exists() else []


def patch(client, image_id, operations):
    return client.patch(f"{API}/images/{image_id}", json.dumps(operations), content_type=PATCH)


def make_active(client, data: bytes, **fields) -> dict:
    created = create(client, **fields)
    assert created.status_code == 201, created.content
    uploaded = put_data(client, created.json()["id"], data)
    assert uploaded.status_code == 204, uploaded.content
    return client.get(f"{API}/images/{created.json()['id']}").json()


def test_the_catalog_lists_glance_and_its_versions_need_no_token(make_user, client):
    make_user("cat-user")
    login = client.post(
        "/identity/v3/auth/tokens",
        {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": "cat-user",
                            "domain": {"id": "default"},
                            "password": "pw-Corral-1",
                        }
                    },
                }
            }
        },
        content_type="application/json",
    )
    services = {s["type"]: s for s in login.json()["token"]["catalog"]}
    assert services["image"]["name"] == "glance"
    assert services["image"]["endpoints"][0]["url"] == "http://testserver/image"

    for path in ("/image", "/image/", "/image/versions", "/image/v2", "/image/v2/"):
        response = client.get(path)
        assert response.status_code == 200, path
        current = response.json()["versions"][0]
        assert current["status"] == "CURRENT"
        assert current["id"].startswith("v2.")
        assert current["links"] == [{"rel": "self", "href": "http://testserver/image/v2/"}]


def test_an_image_is_queued_then_its_upload_makes_it_active_with_its_hashes(
    uploader, glance_for, image_store, qcow2_bytes
):
    client = glance_for(uploader)

    created = create(
        client, name="Ubuntu 24.04 (cloud)", min_disk=2, tags=["lts"], os_distro="ubuntu"
    )

    assert created.status_code == 201, created.content
    queued = created.json()
    assert (queued["status"], queued["name"], queued["size"], queued["checksum"]) == (
        "queued",
        "Ubuntu 24.04 (cloud)",
        None,
        None,
    )
    assert (queued["os_distro"], queued["tags"], queued["min_disk"]) == ("ubuntu", ["lts"], 2)
    assert queued["owner"] == str(uploader.pk)
    assert queued["self"] == f"/v2/images/{queued['id']}"
    assert not Image.objects.exists()

    uploaded = put_data(client, queued["id"], qcow2_bytes)

    assert uploaded.status_code == 204, uploaded.content
    active = client.get(f"{API}/images/{queued['id']}").json()
    assert active["status"] == "active"
    assert (active["disk_format"], active["container_format"]) == ("qcow2", "bare")
    assert (active["size"], active["virtual_size"]) == (len(qcow2_bytes), QCOW2_VIRTUAL_SIZE)
    assert active["checksum"] == hashlib.md5(qcow2_bytes).hexdigest()
    assert active["os_hash_algo"] == "sha512"
    assert active["os_hash_value"] == hashlib.sha512(qcow2_bytes).hexdigest()
    assert (active["name"], active["os_distro"], active["visibility"]) == (
        "Ubuntu 24.04 (cloud)",
        "ubuntu",
        "public",
    )
    image = Image.objects.get(uuid=queued["id"])
    # Corral's name is valid for libvirt; Glance's stays as given.
    assert image.name == f"Ubuntu-24.04-cloud-{uuid.UUID(queued['id']).hex[:8]}"
    assert (image.format, image.uploaded_by, image.cluster) == ("qcow2", uploader, None)
    assert (image_store / image.file).read_bytes() == qcow2_bytes


def test_the_data_downloads_as_uploaded_with_its_md5(uploader, glance_for, image_store):
    client = glance_for(uploader)
    data = bytes(range(256)) * 64
    image = make_active(client, data, disk_format="raw", name="raw-one")

    response = client.get(
        f"{API}/images/{image['id']}/file", HTTP_ACCEPT="application/octet-stream"
    )

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == data
    assert response["Content-MD5"] == hashlib.md5(data).hexdigest()
    assert response["Content-Type"] == "application/octet-stream"


def test_a_queued_image_has_no_data_to_download(uploader, glance_for):
    client = glance_for(uploader)
    queued = create(client, name="empty").json()

    response = client.get(f"{API}/images/{queued['id']}/file")

    assert response.status_code == 204


def test_a_disk_format_the_content_contradicts_is_a_400_and_the_image_stays_queued(
    uploader, glance_for, image_store, qcow2_bytes
):
    client = glance_for(uploader)
    queued = create(client, name="said-raw", disk_format="raw").json()

    response = put_data(client, queued["id"], qcow2_bytes)

    assert response.status_code == 400
    assert response.json() == {
        "message": "disk_format: The file is qcow2, not raw.",
        "code": "400 Bad Request",
        "title": "Bad Request",
    }
    assert client.get(f"{API}/images/{queued['id']}").json()["status"] == "queued"
    assert not Image.objects.exists()
    assert stored_files(image_store) == []


def test_a_file_that_is_no_disk_image_is_a_400(uploader, glance_for, image_store):
    client = glance_for(uploader)
    queued = create(client, name="vmdk", disk_format=None).json()

    response = put_data(client, queued["id"], b"KDMV" + b"\0" * 1020)

    assert response.status_code == 400
    assert response.json()["message"].startswith("data: This is a VMDK file")
    assert stored_files(image_store) == []


def test_an_upload_over_the_size_limit_is_a_413_and_keeps_nothing(
    uploader, glance_for, image_store, settings
):
    settings.CORRAL_IMAGE_MAX_BYTES = 4096
    client = glance_for(uploader)
    queued = create(client, name="big", disk_format="raw").json()

    response = put_data(client, queued["id"], b"\0" * 8192)

    assert response.status_code == 413
    assert response.json()["message"] == "The image is over the limit of 4096 bytes."
    assert GlanceImage.objects.get(id=queued["id"]).image is None
    assert stored_files(image_store) == []


def test_an_upload_past_the_uploaders_image_storage_quota_is_a_413_and_keeps_nothing(
    make_user, grant, make_cluster, glance_for, image_store
):
    user = make_user()
    grant(user, "PowerUser", make_cluster())
    Quota.objects.create(image_gb=0)  # the default for everyone: no image storage
    client = glance_for(user)
    queued = create(client, name="mine", disk_format="raw").json()

    response = put_data(client, queued["id"], b"\0" * 512)

    assert response.status_code == 413
    assert response.json()["message"] == (
        "Quota exceeded for image storage: requested less than 0.01 GB, but already used 0 of 0 GB."
    )
    assert GlanceImage.objects.get(id=queued["id"]).image is None
    assert stored_files(image_store) == []


def test_a_user_reads_their_image_quota_and_its_use_goes_up_with_an_upload(
    make_user, grant, make_cluster, glance_for, image_store, django_assert_max_num_queries
):
    user = make_user()
    grant(user, "PowerUser", make_cluster())
    Quota.objects.create(images=3, image_gb=2)  # the default for everyone
    client = glance_for(user)
    # The token, the limits, the VMs, images, snapshots, queued images.
    with django_assert_max_num_queries(6):
        before = client.get(f"{API}/info/usage")
    queued = create(client, name="three-mib", disk_format="raw").json()
    while_queued = client.get(f"{API}/info/usage").json()["usage"]

    put_data(client, queued["id"], b"\0" * (3 * 1024 * 1024 + 512))
    after = client.get(f"{API}/info/usage/").json()["usage"]

    assert before.status_code == 200
    assert before.json() == {
        "usage": {
            "image_size_total": {"limit": 2048, "usage": 0},
            "image_count_total": {"limit": 3, "usage": 0},
            "image_stage_total": {"limit": -1, "usage": 0},
            "image_count_uploading": {"limit": -1, "usage": 0},
        }
    }
    assert while_queued["image_count_total"] == {"limit": 3, "usage": 1}  # as Glance counts it
    assert after["image_size_total"] == {"limit": 2048, "usage": 3}  # whole MiB, rounded down
    assert after["image_count_total"] == {"limit": 3, "usage": 1}


def test_a_queued_image_counts_and_one_past_the_images_limit_is_a_413(
    make_user, grant, make_cluster, glance_for, image_store
):
    user = make_user()
    grant(user, "PowerUser", make_cluster())
    Quota.objects.create(images=2)
    client = glance_for(user)
    make_active(client, b"\0" * 512, disk_format="raw", name="uploaded")
    queued = create(client, name="waiting", disk_format="raw")

    refused = create(client, name="one-too-many", disk_format="raw")
    client.delete(f"{API}/images/{queued.json()['id']}")
    again = create(client, name="room-again", disk_format="raw")

    assert queued.status_code == 201
    assert refused.status_code == 413
    assert refused.json()["message"] == (
        "Quota exceeded for images: requested 1, but already used 2 of 2."
    )
    assert again.status_code == 201
    assert sorted(GlanceImage.objects.filter(owner=user).values_list("name", flat=True)) == [
        "room-again",
        "uploaded",
    ]


def test_image_usage_needs_a_token_and_shows_no_limit_as_minus_one(
    db, client, make_user, glance_for
):
    anonymous = client.get(f"{API}/info/usage")
    unlimited = glance_for(make_user(superuser=True)).get(f"{API}/info/usage").json()["usage"]

    assert anonymous.status_code == 401
    assert anonymous.json()["title"] == "Unauthorized"
    assert {name: row["limit"] for name, row in unlimited.items()} == {
        "image_size_total": -1,
        "image_count_total": -1,
        "image_stage_total": -1,
        "image_count_uploading": -1,
    }


def test_uploading_twice_is_a_409(uploader, glance_for, image_store):
    client = glance_for(uploader)
    image = make_active(client, b"\0" * 512, disk_format="raw", name="once")

    response = put_data(client, image["id"], b"\1" * 512)

    assert response.status_code == 409
    assert Image.objects.get().sha256 == hashlib.sha256(b"\0" * 512).hexdigest()


def test_glance_names_may_repeat_while_corral_names_stay_unique(uploader, glance_for, image_store):
    client = glance_for(uploader)

    first = make_active(client, b"\0" * 512, disk_format="raw", name="debian")
    second = make_active(client, b"\1" * 512, disk_format="raw", name="debian")

    assert (first["name"], second["name"]) == ("debian", "debian")
    assert Image.objects.get(uuid=first["id"]).name == "debian"
    assert Image.objects.get(uuid=second["id"]).name == f"debian-{uuid.UUID(second['id']).hex[:8]}"
    listed = client.get(f"{API}/images", {"name": "debian"}).json()["images"]
    assert sorted(image["id"] for image in listed) == sorted([first["id"], second["id"]])


def test_kernels_and_initrds_are_aki_and_ari(uploader, glance_for, image_store):
    client = glance_for(uploader)
    kernel = bytearray(4096)
    kernel[0x202:0x206] = b"HdrS"

    shown = make_active(client, bytes(kernel), disk_format="aki", container_format="aki")

    assert (shown["disk_format"], shown["container_format"]) == ("aki", "aki")
    assert Image.objects.get(uuid=shown["id"]).kind == "kernel"


def test_an_image_uploaded_through_corrals_api_shows_its_corral_name_and_hashes(
    uploader, glance_for, make_image
):
    content = b"\7" * 2048
    image = make_image(content=content, name="corral-disk")
    assert image.md5 == ""  # stored before Corral kept MD5 and SHA-512

    shown = glance_for(uploader).get(f"{API}/images/{image.uuid}").json()

    assert (shown["name"], shown["status"], shown["disk_format"]) == (
        "corral-disk",
        "active",
        "raw",
    )
    assert shown["checksum"] == hashlib.md5(content).hexdigest()
    assert shown["os_hash_value"] == hashlib.sha512(content).hexdigest()
    image.refresh_from_db()
    assert image.sha512 == shown["os_hash_value"]


def test_another_users_queued_image_is_not_found(uploader, make_user, grant, glance_for):
    other = make_user("other-uploader")
    grant(other, "ClusterAdmin")
    queued = create(glance_for(uploader), name="mine").json()
    client = glance_for(other)

    assert client.get(f"{API}/images/{queued['id']}").status_code == 404
    assert put_data(client, queued["id"], b"\0" * 512).status_code == 404
    assert client.delete(f"{API}/images/{queued['id']}").status_code == 404
    assert client.get(f"{API}/images").json()["images"] == []
    assert GlanceImage.objects.filter(id=queued["id"], image=None).exists()


def test_an_image_of_a_cluster_the_caller_cannot_see_is_not_found(
    make_user, grant, make_cluster, make_image, glance_for
):
    seen, hidden = make_cluster(), make_cluster()
    user = make_user("cluster-viewer")
    grant(user, "PowerUser", seen)
    visible = make_image(name="seen-disk", cluster=seen)
    invisible = make_image(name="hidden-disk", cluster=hidden)
    client = glance_for(user)

    response = client.get(f"{API}/images/{invisible.uuid}")

    assert response.status_code == 404
    assert response.json()["message"] == f"No image found with ID {invisible.uuid}"
    listed = client.get(f"{API}/images").json()["images"]
    assert [(image["id"], image["visibility"]) for image in listed] == [
        (str(visible.uuid), "public")
    ]


def test_a_user_who_may_see_images_may_not_delete_the_admins_images(
    make_user, grant, make_cluster, make_image, glance_for
):
    user = make_user("viewer")
    grant(user, "PowerUser", make_cluster())
    image = make_image(name="shared-disk")
    client = glance_for(user)

    assert client.get(f"{API}/images/{image.uuid}").status_code == 200
    refused = client.delete(f"{API}/images/{image.uuid}")
    assert refused.status_code == 403
    assert refused.json()["message"] == "You may not delete image shared-disk."
    assert Image.objects.filter(pk=image.pk).exists()


def test_a_user_who_may_create_no_vm_may_not_create_images(
    make_user, grant, make_cluster, glance_for
):
    user = make_user("vm-user")
    grant(user, "UserRole", make_cluster())

    refused = create(glance_for(user), name="nope")

    assert refused.status_code == 403
    assert refused.json()["message"] == "You may not create images."
    assert not GlanceImage.objects.exists()


def test_deleting_an_image_a_template_uses_is_a_409_and_keeps_it(
    uploader, glance_for, make_image, make_template
):
    image = make_image(name="used-disk")
    make_template(name="uses-it", disk_image=image)

    response = glance_for(uploader).delete(f"{API}/images/{image.uuid}")

    assert response.status_code == 409
    assert response.json() == {
        "message": "Templates use this image: uses-it; change them first.",
        "code": "409 Conflict",
        "title": "Conflict",
    }
    assert Image.objects.filter(pk=image.pk).exists()


def test_deleting_removes_the_image_its_glance_fields_and_its_file(
    uploader, glance_for, image_store, django_capture_on_commit_callbacks
):
    client = glance_for(uploader)
    image = make_active(client, b"\0" * 512, disk_format="raw", name="doomed")
    queued = create(client, name="never-uploaded").json()

    with django_capture_on_commit_callbacks(execute=True):
        deleted = client.delete(f"{API}/images/{image['id']}/")
    assert client.delete(f"{API}/images/{queued['id']}").status_code == 204

    assert deleted.status_code == 204
    assert client.get(f"{API}/images/{image['id']}").status_code == 404
    assert not Image.objects.exists() and not GlanceImage.objects.exists()
    assert stored_files(image_store) == []


@pytest.mark.parametrize(
    "fields, status, message",
    [
        ({"disk_format": "vmdk"}, 400, "disk_format: Corral keeps qcow2 and raw disks"),
        ({"container_format": "ovf"}, 400, "container_format: one of bare, aki, ari"),
        ({"min_disk": -1}, 400, "min_disk: a whole number, 0 or more."),
        ({"min_ram": "lots"}, 400, "min_ram: a whole number, 0 or more."),
        ({"name": "x" * 256}, 400, "name: a string of at most 255 characters"),
        ({"tags": "a,b"}, 400, "tags: a list of strings"),
        ({"visibility": "hidden"}, 400, "visibility: one of private, shared, public, community"),
        ({"protected": True}, 400, "protected: Corral's images are never protected"),
        ({"id": "not-a-uuid"}, 400, "id: 'not-a-uuid' is not a UUID."),
        ({"hw_disk_bus": 3}, 400, "hw_disk_bus: a property's value is a string"),
        ({"status": "active"}, 403, "Attribute 'status' is read-only."),
        ({"checksum": "0" * 32}, 403, "Attribute 'checksum' is read-only."),
        ({"owner": "12345"}, 403, "You may not give an image to another project."),
    ],
)
def test_a_bad_create_body_is_refused_naming_its_field(
    uploader, glance_for, fields, status, message
):
    response = create(glance_for(uploader), **{"name": "bad", **fields})

    assert response.status_code == status
    assert response.json()["message"].startswith(message)
    assert not GlanceImage.objects.exists()


def test_a_body_that_is_not_json_or_not_an_object_is_a_400(uploader, glance_for):
    client = glance_for(uploader)

    broken = client.post(f"{API}/images", "{", content_type="application/json")
    listed = client.post(f"{API}/images", [], format="json")

    assert broken.status_code == 400
    assert broken.json()["message"].startswith("JSON parse error")
    assert listed.status_code == 400
    assert listed.json()["message"] == "The body must be a JSON object of the image's fields."


def test_an_id_given_at_create_is_kept_and_may_not_be_reused(uploader, glance_for):
    client = glance_for(uploader)
    wanted = str(uuid.uuid4())

    first = create(client, id=wanted, name="with-id")
    second = create(client, id=wanted, name="again")

    assert (first.status_code, first.json()["id"]) == (201, wanted)
    assert second.status_code == 409


def test_pages_follow_next_links_through_every_image_newest_first(
    uploader, glance_for, make_image, django_assert_max_num_queries
):
    made = [make_image(name=f"paged-{i}") for i in range(5)]
    client = glance_for(uploader)

    seen, url = [], f"{API}/images?limit=2"
    while url:
        with django_assert_max_num_queries(8):
            page = client.get(url).json()
        assert len(page["images"]) <= 2
        seen += [image["id"] for image in page["images"]]
        url = "/image" + page["next"] if "next" in page else None

    assert seen == [str(image.uuid) for image in reversed(made)]
    assert client.get(f"{API}/images", {"marker": str(uuid.uuid4())}).status_code == 400
    assert client.get(f"{API}/images", {"limit": "-1"}).status_code == 400


def test_the_list_filters_by_id_name_status_and_visibility(uploader, glance_for, make_image):
    one, two, _three = (make_image(name=f"filtered-{i}") for i in range(3))
    client = glance_for(uploader)
    queued = create(client, name="waiting").json()

    def ids(**params):
        return sorted(image["id"] for image in client.get(f"{API}/images", params).json()["images"])

    assert ids(id=f"in:{one.uuid},{two.uuid}") == sorted([str(one.uuid), str(two.uuid)])
    assert ids(name="filtered-1") == [str(two.uuid)]
    assert ids(status="queued") == [queued["id"]]
    assert len(ids(visibility="public", member_status="all")) == 4
    assert ids(visibility="private") == []


def test_a_patch_renames_and_sets_and_removes_properties(uploader, glance_for, image_store):
    client = glance_for(uploader)
    image = make_active(client, b"\0" * 512, disk_format="raw", name="before", os_distro="x")

    response = patch(
        client,
        image["id"],
        [
            {"op": "replace", "path": "/name", "value": "after"},
            {"op": "add", "path": "/hw_disk_bus", "value": "virtio"},
            {"op": "remove", "path": "/os_distro"},
            {"op": "replace", "path": "/min_ram", "value": 512},
        ],
    )

    assert response.status_code == 200, response.content
    shown = client.get(f"{API}/images/{image['id']}").json()
    assert (shown["name"], shown["hw_disk_bus"], shown["min_ram"]) == ("after", "virtio", 512)
    assert "os_distro" not in shown
    assert Image.objects.get().name == "before"  # Corral's own name stays


def test_a_patch_of_a_read_only_attribute_or_a_missing_property_is_refused(
    uploader, glance_for, make_image
):
    image = make_image(name="patched")
    client = glance_for(uploader)

    def change(*operations):
        return patch(client, image.uuid, list(operations)).status_code

    assert change({"op": "replace", "path": "/status", "value": "queued"}) == 403
    assert change({"op": "replace", "path": "/disk_format", "value": "raw"}) == 403
    assert change({"op": "remove", "path": "/nosuch"}) == 409
    assert change({"op": "move", "path": "/name"}) == 400
    assert change({"op": "replace", "path": "/min_disk", "value": -2}) == 400
    plain = client.patch(f"{API}/images/{image.uuid}", [], format="json")
    assert plain.status_code == 415
    assert not GlanceImage.objects.exists()


def test_without_a_token_is_a_401_and_unknown_urls_are_json_404s(db, client):
    refused = client.get(f"{API}/images")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"].startswith("Keystone uri=")
    assert refused.json()["title"] == "Unauthorized"

    for path in ("/image/v1/images", "/image/v2/nosuch", "/image/v2/images/x/y/z"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert response.json()["code"] == "404 Not Found"


def test_find_image_resolves_an_id_or_a_url_for_a_user(uploader, glance_for, make_image, make_user):
    image = make_image(name="ref-disk")
    queued = create(glance_for(uploader), name="pending").json()

    assert find_image(uploader, str(image.uuid)) == image
    assert find_image(uploader, f"http://corral/image/v2/images/{image.uuid}") == image
    with pytest.raises(ImageNotActive):
        find_image(uploader, queued["id"])
    with pytest.raises(ImageNotFound):
        find_image(make_user("stranger"), str(image.uuid))
    with pytest.raises(ImageNotFound):
        find_image(uploader, "not-an-id")


@pytest.fixture
def two_creators(make_user, grant, make_cluster, image_store):
    """Two users who may create VMs (PowerUser of one cluster), not admins."""
    cluster = make_cluster()
    alice, bob = make_user("alice"), make_user("bob")
    for user in (alice, bob):
        grant(user, "PowerUser", cluster)
    return alice, bob


def test_a_user_uploads_a_private_image_that_another_user_cannot_find(
    two_creators, glance_for, qcow2_bytes
):
    alice, bob = two_creators
    owner = glance_for(alice)
    created = create(owner, name="alices")
    assert created.status_code == 201, created.content
    assert (created.json()["visibility"], created.json()["owner"]) == ("private", str(alice.pk))
    image_id = created.json()["id"]
    assert put_data(owner, image_id, qcow2_bytes).status_code == 204

    other = glance_for(bob)
    assert other.get(f"{API}/images/{image_id}").status_code == 404
    assert other.get(f"{API}/images/{image_id}/file").status_code == 404
    assert other.get(f"{API}/images/{image_id}/members").status_code == 404
    assert other.get(f"{API}/images").json()["images"] == []
    assert other.get(f"{API}/images", {"visibility": "private"}).json()["images"] == []
    assert owner.get(f"{API}/images/{image_id}").json()["status"] == "active"


def test_members_are_offered_a_shared_image_and_accept_it(two_creators, glance_for, qcow2_bytes):
    alice, bob = two_creators
    owner, member = glance_for(alice), glance_for(bob)
    image_id = create(owner, name="to-share", visibility="shared").json()["id"]
    put_data(owner, image_id, qcow2_bytes)

    offered = owner.post(f"{API}/images/{image_id}/members", {"member": str(bob.pk)}, format="json")
    assert offered.status_code == 200, offered.content
    assert (offered.json()["member_id"], offered.json()["status"]) == (str(bob.pk), "pending")
    assert member.get(f"{API}/images/{image_id}").status_code == 200
    assert member.get(f"{API}/images").json()["images"] == []
    again = owner.post(f"{API}/images/{image_id}/members", {"member": str(bob.pk)}, format="json")
    assert again.status_code == 409

    answer = member.put(
        f"{API}/images/{image_id}/members/{bob.pk}", {"status": "accepted"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert [row["id"] for row in member.get(f"{API}/images").json()["images"]] == [image_id]
    listed = owner.get(f"{API}/images/{image_id}/members").json()["members"]
    assert [(row["member_id"], row["status"]) for row in listed] == [(str(bob.pk), "accepted")]
    assert (
        owner.put(
            f"{API}/images/{image_id}/members/{bob.pk}", {"status": "rejected"}, format="json"
        ).status_code
        == 403
    )

    assert owner.delete(f"{API}/images/{image_id}/members/{bob.pk}").status_code == 204
    assert member.get(f"{API}/images/{image_id}").status_code == 404


def test_a_member_is_named_by_its_users_name_or_as_a_group(
    two_creators, make_user, glance_for, qcow2_bytes
):
    alice, bob = two_creators
    carol = make_user("carol")
    team = Group.objects.create(name="team")
    carol.groups.add(team)
    owner = glance_for(alice)
    image_id = create(owner, name="to-share", visibility="shared").json()["id"]
    put_data(owner, image_id, qcow2_bytes)
    members = f"{API}/images/{image_id}/members"

    by_name = owner.post(members, {"member": "bob"}, format="json")
    as_group = owner.post(members, {"member": f"g{team.pk}"}, format="json")
    unknown = owner.post(members, {"member": "nobody"}, format="json")

    assert (by_name.status_code, by_name.json()["member_id"]) == (200, str(bob.pk))
    assert (as_group.status_code, as_group.json()["member_id"]) == (200, f"g{team.pk}")
    assert unknown.status_code == 400
    assert unknown.json()["message"] == (
        "No project nobody: a user's project id or name, or g and a group's id."
    )
    assert glance_for(carol).get(f"{API}/images/{image_id}").status_code == 200
    assert owner.get(f"{members}/bob").json()["member_id"] == str(bob.pk)
    assert owner.delete(f"{members}/bob").status_code == 204
    assert glance_for(bob).get(f"{API}/images/{image_id}").status_code == 404


def test_only_admins_make_an_image_public(two_creators, glance_for, uploader, qcow2_bytes):
    alice, bob = two_creators
    owner = glance_for(alice)
    refused = create(owner, name="public-at-once", visibility="public")
    assert refused.status_code == 403
    image_id = create(owner, name="later-public").json()["id"]
    put_data(owner, image_id, qcow2_bytes)
    publish = [{"op": "replace", "path": "/visibility", "value": "public"}]

    by_owner = patch(owner, image_id, publish)
    assert by_owner.status_code == 403, by_owner.content
    community = [{"op": "replace", "path": "/visibility", "value": "community"}]
    assert patch(owner, image_id, community).status_code == 200
    assert glance_for(bob).get(f"{API}/images/{image_id}").status_code == 200
    assert glance_for(bob).get(f"{API}/images").json()["images"] == []

    by_admin = patch(glance_for(uploader), image_id, publish)
    assert by_admin.status_code == 200, by_admin.content
    listed = glance_for(bob).get(f"{API}/images").json()["images"]
    assert [(row["id"], row["visibility"]) for row in listed] == [(image_id, "public")]
