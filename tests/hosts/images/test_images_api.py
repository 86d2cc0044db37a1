"""Uploading images: streamed into the image store, the format read from the content, bad
files refused with a field message and nothing kept."""

import hashlib
import subprocess

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from hosts.models import Image, ImageCopy

QCOW2_VIRTUAL_SIZE = 64 * 1024 * 1024


@pytest.fixture
def qcow2_bytes(tmp_path):
    path = tmp_path / "disk.qcow2"
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", str(path), str(QCOW2_VIRTUAL_SIZE)], check=True
    )
    return path.read_bytes()


def upload(client, name, kind, content, **extra):
    body = {"name": name, "kind": kind, "file": SimpleUploadedFile("f.img", content), **extra}
    return client.post("/api/images/", body, format="multipart")


def stored_files(store):
    return sorted(p.name for p in store.iterdir()) if store.exists() else []


def test_a_qcow2_upload_is_stored_with_its_format_size_and_checksum(
    admin_user, client_for, image_store, qcow2_bytes
):
    response = upload(client_for(admin_user), "base-disk", "disk", qcow2_bytes)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["format"] == "qcow2"
    assert body["size_bytes"] == len(qcow2_bytes)
    assert body["virtual_size_bytes"] == QCOW2_VIRTUAL_SIZE
    assert body["sha256"] == hashlib.sha256(qcow2_bytes).hexdigest()
    assert body["status"] == "ready"
    image = Image.objects.get(pk=body["id"])
    assert (image_store / image.file).read_bytes() == qcow2_bytes
    assert stored_files(image_store) == [image.file]


def test_an_upload_keeps_its_md5_and_sha512_for_glance(admin_user, client_for, image_store):
    content = bytes(range(256)) * 8

    response = upload(client_for(admin_user), "hashed-disk", "disk", content)

    assert response.status_code == 201, response.content
    image = Image.objects.get(pk=response.json()["id"])
    assert image.md5 == hashlib.md5(content).hexdigest()
    assert image.sha512 == hashlib.sha512(content).hexdigest()


def test_a_raw_disk_is_recognised_as_raw(admin_user, client_for, image_store):
    response = upload(client_for(admin_user), "raw-disk", "disk", b"\0" * 4096)

    assert response.status_code == 201, response.content
    assert response.json()["format"] == "raw"


@pytest.mark.parametrize(
    "content, words",
    [
        (b"KDMV" + b"\0" * 1020, "VMDK"),
        (b"\x1f\x8b" + b"\0" * 1022, "gzip"),
        (b"not a disk at all", "neither qcow2 nor raw"),
    ],
)
def test_a_disk_of_an_unknown_format_is_refused_and_nothing_is_kept(
    admin_user, client_for, image_store, content, words
):
    response = upload(client_for(admin_user), "odd-disk", "disk", content)

    assert response.status_code == 400, response.content
    assert words in str(response.json()["file"])
    assert not Image.objects.filter(name="odd-disk").exists()
    assert stored_files(image_store) == []


def test_a_qcow2_with_a_backing_file_is_refused(admin_user, client_for, image_store, tmp_path):
    base, top = tmp_path / "base.qcow2", tmp_path / "top.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "1M"], check=True)
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(base), "-F", "qcow2", str(top)],
        check=True,
    )

    response = upload(client_for(admin_user), "top-disk", "disk", top.read_bytes())

    assert response.status_code == 400, response.content
    assert "backing file" in str(response.json()["file"])
    assert stored_files(image_store) == []


def test_a_qcow2_keeping_its_data_in_an_external_file_is_refused(
    admin_user, client_for, image_store, tmp_path
):
    image = tmp_path / "split.qcow2"
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-o", f"data_file={tmp_path / 'data'}"]
        + [str(image), "1M"],
        check=True,
    )

    response = upload(client_for(admin_user), "split-disk", "disk", image.read_bytes())

    assert response.status_code == 400, response.content
    assert "external file" in str(response.json()["file"])
    assert stored_files(image_store) == []


def test_an_unknown_declared_format_is_a_field_error(admin_user, client_for, image_store):
    response = upload(client_for(admin_user), "vmdk-disk", "disk", b"\0" * 512, format="vmdk")

    assert response.status_code == 400, response.content
    assert "format" in response.json()
    assert stored_files(image_store) == []


def test_a_file_over_the_size_limit_is_refused_and_nothing_is_kept(
    admin_user, client_for, image_store, settings
):
    settings.CORRAL_IMAGE_MAX_BYTES = 1024 * 1024

    response = upload(client_for(admin_user), "big-disk", "disk", b"\0" * (3 * 1024 * 1024))

    assert response.status_code == 400, response.content
    assert "over the limit" in str(response.json()["file"])
    assert stored_files(image_store) == []


def test_a_file_that_is_no_kernel_is_refused_as_a_kernel(admin_user, client_for, image_store):
    response = upload(client_for(admin_user), "bad-kernel", "kernel", b"\0" * 2048)

    assert response.status_code == 400, response.content
    assert "kernel" in str(response.json()["file"])


def test_a_taken_name_is_refused_on_the_name(admin_user, client_for, make_image, image_store):
    make_image(name="taken")

    response = upload(client_for(admin_user), "taken", "disk", b"\0" * 512)

    assert response.status_code == 400, response.content
    assert "name" in response.json()
    assert len(stored_files(image_store)) == 1


def test_an_image_a_template_uses_cannot_be_deleted(
    admin_user, client_for, make_image, make_template, image_store
):
    image = make_image()
    make_template(name="uses-it", disk_image=image)

    response = client_for(admin_user).delete(f"/api/images/{image.pk}/")

    assert response.status_code == 409, response.content
    assert "uses-it" in response.json()["detail"]
    assert (image_store / image.file).exists()


def test_deleting_an_image_removes_its_file(
    admin_user, client_for, make_image, image_store, django_capture_on_commit_callbacks
):
    image = make_image()

    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(admin_user).delete(f"/api/images/{image.pk}/")

    assert response.status_code == 204, response.content
    assert stored_files(image_store) == []


def test_a_template_refuses_an_image_of_the_wrong_kind(
    admin_user, client_for, make_image, image_store
):
    kernel = make_image(kind="kernel")

    response = client_for(admin_user).post(
        "/api/templates/", {"name": "wrong-kind", "disk_image": kernel.pk}, format="json"
    )

    assert response.status_code == 400, response.content
    assert "kernel image" in str(response.json()["disk_image"])


def test_an_image_shows_its_copy_on_each_host_with_its_state(
    admin_user, client_for, make_image, make_host, django_assert_max_num_queries
):
    image = make_image()
    ready, failed = make_host(), make_host()
    ImageCopy.objects.create(image=image, host=ready, state="ready", path="/pool/x")
    ImageCopy.objects.create(image=image, host=failed, state="failed", error="No room.")

    with django_assert_max_num_queries(8):
        response = client_for(admin_user).get(f"/api/images/{image.pk}/")

    copies = {c["host_name"]: (c["state"], c["error"]) for c in response.json()["copies"]}
    assert copies == {ready.name: ("ready", ""), failed.name: ("failed", "No room.")}


def test_listing_images_takes_the_same_queries_for_many_images(
    admin_user, client_for, make_image, django_assert_max_num_queries
):
    for _ in range(20):
        make_image()

    with django_assert_max_num_queries(6):
        response = client_for(admin_user).get("/api/images/")

    assert response.json()["count"] == 20


def test_a_vm_disk_smaller_than_its_templates_disk_image_is_refused(
    admin_user, client_for, make_image, make_template, make_cluster
):
    image = make_image(content=b"\0" * 1024)
    Image.objects.filter(pk=image.pk).update(virtual_size_bytes=3 * 1024**3)
    template = make_template(disk_image=image, disk_gb=5)

    response = client_for(admin_user).post(
        "/api/vms/",
        {"name": "small-disk", "cluster": make_cluster().pk, "template": template.pk, "disk_gb": 2},
        format="json",
    )

    assert response.status_code == 400, response.content
    assert "at least that big" in str(response.json()["disk_gb"])


def test_a_template_may_not_use_an_image_of_another_cluster(
    admin_user, client_for, make_image, make_cluster, image_store
):
    image = make_image(cluster=make_cluster())

    response = client_for(admin_user).post(
        "/api/templates/",
        {"name": "elsewhere", "cluster": make_cluster().pk, "disk_image": image.pk},
        format="json",
    )

    assert response.status_code == 400, response.content
    assert "another cluster" in str(response.json()["disk_image"])


def test_a_file_sent_with_a_rename_is_not_kept(admin_user, client_for, make_image, image_store):
    image = make_image()

    response = client_for(admin_user).patch(
        f"/api/images/{image.pk}/",
        {"description": "renamed", "file": SimpleUploadedFile("x", b"\0" * 512)},
        format="multipart",
    )

    assert response.status_code == 200, response.content
    assert stored_files(image_store) == [image.file]
