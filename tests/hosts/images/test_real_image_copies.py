"""Images copied to a real QEMU host's pool (a session daemon): a copy the pool has no room
for, or whose file is gone from the image store, fails clearly and leaves no volume; deleting
an image deletes its copies from the hosts' pools through a job per host."""

import libvirt
import pytest

from hosts import driver, jobs, sync
from hosts.models import CopyState, Host, Image, ImageCopy, Job, JobKind, JobState
from tests.conftest import unique

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1024**3


@pytest.fixture
def qemu_host(qemu_daemons, make_cluster):
    host = Host.objects.create(name=unique("qemu"), cluster=make_cluster(), uri=qemu_daemons[0].uri)
    sync.sync_host(host.pk)
    host.refresh_from_db()
    return host


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
    jobs.run(job.pk)
    job.refresh_from_db()
    return job


def test_an_image_bigger_than_the_pools_free_space_is_refused_and_leaves_no_volume(
    qemu_host, make_image, image_store
):
    free = driver.volumes.ensure_pool(qemu_host.uri, qemu_host.storage_pool).free_bytes
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
    jobs.run(cleanup.pk)
    cleanup.refresh_from_db()
    assert cleanup.state == JobState.SUCCEEDED, cleanup.error_message
    assert volume not in _volumes(qemu_host)
    assert not Image.objects.filter(pk=image.pk).exists()
