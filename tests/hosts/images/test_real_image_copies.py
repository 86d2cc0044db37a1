"""Images copied to a real QEMU host's pool (a session daemon): a copy the pool has no room
for, or whose file is gone from the image store, fails clearly and leaves no volume; deleting
an image deletes its copies from the hosts' pools through a job per host, and an image deleted
while it is being copied leaves no volume, whichever of the copy and the delete job ends first."""

from contextlib import ExitStack

import libvirt
import pytest
from django.db import connection

from hosts import images, jobs
from hosts.driver.libvirt import volumes
from hosts.models import CopyState, Host, Image, ImageCopy, Job, JobKind, JobState
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import holding, lock_waiters, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1024**3


def _volumes(host: Host) -> set[str]:
    conn = libvirt.open(host.uri)
    try:
        pool = conn.storagePoolLookupByName(host.storage_pool)
        pool.refresh(0)
        return set(pool.listVolumes())
    finally:
        conn.close()


def _copy(host: Host, image: Image) -> Job:
    job = jobs.submit(JobKind.COPY_IMAGE, host=host, params={"image": image.pk})
    jobs.run(job.pk, OPERATION_BY_KIND)
    job.refresh_from_db()
    return job


def test_an_image_bigger_than_the_pools_free_space_is_refused_and_leaves_no_volume(
    qemu_host, make_image, image_store
):
    free = volumes.ensure_pool(qemu_host.uri, qemu_host.storage_pool).free_bytes
    image = make_image(content=b"\0" * 512)
    # A sparse raw disk one GiB larger than what the host's pool really has free.
    with open(image_store / image.file, "r+b") as fh:
        fh.truncate(free + GIB)
    Image.objects.filter(pk=image.pk).update(size_bytes=free + GIB, virtual_size_bytes=free + GIB)

    job = _copy(qemu_host, image)

    assert (job.state, job.error_code) == (JobState.FAILED, "no_room")
    assert f"the pool {qemu_host.storage_pool} has" in job.error_message
    assert image.volume_name not in _volumes(qemu_host)
    assert ImageCopy.objects.get(image=image, host=qemu_host).state == CopyState.FAILED


def test_an_image_whose_file_is_gone_from_the_store_fails_its_copy_and_leaves_no_volume(
    qemu_host, make_image, image_store
):
    image = make_image(content=b"\1" * 4096)
    (image_store / image.file).unlink()

    job = _copy(qemu_host, image)

    assert (job.state, job.error_code) == (JobState.FAILED, "image_missing")
    assert f"The file of image {image.name} is missing" in job.error_message
    assert image.volume_name not in _volumes(qemu_host)
    copy = ImageCopy.objects.get(image=image, host=qemu_host)
    assert (copy.state, copy.error) == (CopyState.FAILED, job.error_message)


def test_deleting_an_image_deletes_its_copy_from_the_hosts_pool(
    qemu_host, make_image, admin_user, client_for, django_capture_on_commit_callbacks
):
    image = make_image(content=b"\2" * 4096)
    assert _copy(qemu_host, image).state == JobState.SUCCEEDED
    volume = image.volume_name
    assert volume in _volumes(qemu_host)

    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(admin_user).delete(f"/api/images/{image.pk}/")

    assert response.status_code == 204, response.content
    assert volume in _volumes(qemu_host)  # the request itself never reaches the host
    cleanup = Job.objects.get(kind=JobKind.DELETE_IMAGE, host=qemu_host)
    jobs.run(cleanup.pk, OPERATION_BY_KIND)
    cleanup.refresh_from_db()
    assert cleanup.state == JobState.SUCCEEDED, cleanup.error_message
    assert volume not in _volumes(qemu_host)
    assert not Image.objects.filter(pk=image.pk).exists()


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("pausing a copy between its steps needs PostgreSQL's row locks")


def _lock(queryset):
    return lambda: queryset.select_for_update().get()


def _copy_job(host: Host, image: Image) -> Job:
    return jobs.submit(JobKind.COPY_IMAGE, host=host, params={"image": image.pk})


def test_an_image_deleted_while_it_is_being_copied_leaves_no_volume_on_the_host(
    postgres_only, qemu_host, make_image, admin_user, job_in_thread
):
    image = make_image(content=b"\3" * 4096)
    volume = image.volume_name
    # An earlier copy failed: the new one claims its row again. Holding that row, then the
    # copy's job row, pauses the copy just after its claim (its next step writes its job).
    earlier = ImageCopy.objects.create(image=image, host=qemu_host, state=CopyState.FAILED)
    with ExitStack() as paused:
        with holding(_lock(ImageCopy.objects.filter(pk=earlier.pk))):
            copy = _copy_job(qemu_host, image)
            thread = job_in_thread(copy)
            wait_until(lock_waiters, timeout=30, message="the copy never reached its claim")
            paused.enter_context(holding(_lock(Job.objects.filter(pk=copy.pk))))
        wait_until(
            lambda: ImageCopy.objects.filter(pk=earlier.pk, state=CopyState.COPYING).exists(),
            timeout=30,
            message="the copy never claimed the image",
        )
        # The image is deleted while the copy runs; the delete commits only once the copy has
        # made its volume and is about to say it is ready.
        being_deleted = Image.objects.get(pk=image.pk)  # delete() empties the pk it is given
        with holding(lambda: images.delete_image(being_deleted, requested_by=admin_user)):
            paused.close()
            wait_until(
                lambda: (
                    Job.objects.get(pk=copy.pk).step.startswith("Copying image") and lock_waiters()
                ),
                timeout=30,
                message="the copy never waited for the delete",
            )
            assert volume in _volumes(qemu_host)
    thread.join(60)
    assert not thread.is_alive()

    # The copy itself removed its volume, before the delete's job ran.
    assert volume not in _volumes(qemu_host)
    copy.refresh_from_db()
    assert (copy.state, copy.error_code) == (JobState.FAILED, "image_deleted")
    assert copy.error_message == (
        f"Image {image.name} was deleted while it was being copied to {qemu_host.name}; "
        "the copy was removed from the host."
    )
    cleanup = Job.objects.get(kind=JobKind.DELETE_IMAGE, host=qemu_host)
    jobs.run(cleanup.pk, OPERATION_BY_KIND)
    cleanup.refresh_from_db()
    assert cleanup.state == JobState.SUCCEEDED, cleanup.error_message
    assert cleanup.result["deleted"] is False
    assert volume not in _volumes(qemu_host)
    assert not Image.objects.filter(pk=image.pk).exists()
    assert not ImageCopy.objects.exists()


def test_a_copy_that_claims_an_image_being_deleted_fails_saying_so_and_makes_no_volume(
    postgres_only, qemu_host, make_image, admin_user, job_in_thread
):
    image = make_image(content=b"\4" * 4096)
    being_deleted = Image.objects.get(pk=image.pk)  # delete() empties the pk it is given

    with holding(lambda: images.delete_image(being_deleted, requested_by=admin_user)):
        copy = _copy_job(qemu_host, image)
        thread = job_in_thread(copy)
        wait_until(lock_waiters, timeout=30, message="the copy never waited for the delete")
    thread.join(60)

    copy.refresh_from_db()
    assert (copy.state, copy.error_code) == (JobState.FAILED, "image_deleted")
    assert copy.error_message == f"Image {image.name} was deleted."
    assert image.volume_name not in _volumes(qemu_host)
    assert not ImageCopy.objects.exists()
