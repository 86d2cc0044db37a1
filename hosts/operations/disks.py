"""A VM's disks on a real host: the images it boots from copied into the host's storage pool
(once per image and host, however many jobs need them at once) and its own qcow2 overlay.

``boot_for`` is a job step of starting or preparing a VM; ``reset_disk`` recreates the overlay
(a stateless pool's VM boots from its base again); ``remove_disk`` deletes it with the VM.
Hosts that keep no disks (simulated hosts) skip these steps.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from hosts import driver
from hosts.error_codes import JobErrorCode
from hosts.guests import ssh
from hosts.images import image_path
from hosts.jobs import JobContext, JobFailed
from hosts.models import CopyState, Host, Image, ImageCopy, VirtualMachine
from hosts.operations.common import POLL_S, host_call

GIB = 1024**3
IMAGE_VOLUME = re.compile(r"corral-image-\d+-[0-9a-f]{12}\.(qcow2|raw)")


def disk_name(vm: VirtualMachine) -> str:
    return f"{vm.uuid}.qcow2"


def real_storage(host: Host) -> bool:
    return host_call(driver.keeps_disks, host.uri)


def boot_for(ctx: JobContext, vm: VirtualMachine, host: Host, *, reset: bool = False) -> dict:
    """The images on the host and the VM's overlay (made now unless it exists, or afresh with
    ``reset``); returns the domain spec's boot fields ({} on a simulated host)."""
    if not real_storage(host):
        return {}
    template = vm.template
    ctx.step(f"Preparing the storage pool {host.storage_pool} on {host.name}", 0.3)
    try:
        driver.ensure_pool(host.uri, host.storage_pool, host.storage_path)
    except driver.DriverError as exc:
        raise JobFailed(exc.code, f"{host.name}: {exc.message}") from exc
    paths = {}
    disk_image = vm.disk_image or template.disk_image
    images = {
        "disk_image": disk_image,
        "kernel_image": template.kernel_image,
        "initrd_image": template.initrd_image,
    }
    for field, image in images.items():
        if image is not None:
            paths[field] = ensure_copy(ctx, image, host)
    backing = None
    if disk_image is not None:
        backing = (paths["disk_image"], disk_image.format)
    ctx.step(("Recreating" if reset else "Preparing") + f" the VM's disk on {host.name}", 0.4)
    disk = host_call(
        lambda: driver.create_disk(
            host.uri, host.storage_pool, disk_name(vm), vm.disk_gb * GIB, backing, replace=reset
        )
    )
    user_nic = not template.networks and not template.bridge and not host.reported_networks
    ssh_port = ssh.claim_port(vm, host) if user_nic else None
    if user_nic and ssh_port is None and host.guest_ssh_port_min is not None:
        ctx.log(f"{host.name} has no guest SSH port free: the guest's SSH stays unpublished")
    return {
        "disk_path": disk,
        "kernel": paths.get("kernel_image", ""),
        "initrd": paths.get("initrd_image", ""),
        "cmdline": template.kernel_cmdline,
        "user_nic": user_nic,
        "ssh_forward_port": ssh_port,
        "ssh_forward_listen": ssh.forward_listen_address(host),
    }


def reset_disk(ctx: JobContext, vm: VirtualMachine) -> dict:
    return boot_for(ctx, vm, vm.host, reset=True)


def remove_disk(ctx: JobContext, vm: VirtualMachine, host: Host) -> None:
    if real_storage(host) and host_call(
        driver.delete_volume, host.uri, host.storage_pool, disk_name(vm)
    ):
        ctx.log(f"Deleted the disk {disk_name(vm)} on {host.name}")


def carry_log(vm: VirtualMachine, source: Host, destination: Host) -> None:
    """The tail of the VM's console log copied to ``destination`` before a migration."""
    host_call(
        driver.carry_log,
        source.uri,
        destination.uri,
        str(vm.uuid),
        source.storage_pool,
        destination.storage_pool,
    )


def copy_image(ctx: JobContext) -> dict:
    """The job that copies an image to a host ahead of need (a pool's hosts)."""
    host = ctx.job.host
    image = Image.objects.filter(pk=ctx.job.params.get("image")).first()
    if image is None or host is None:
        raise JobFailed(JobErrorCode.GONE, "The image or the host is gone.")
    if not real_storage(host):
        return {"simulated": True}
    try:
        driver.ensure_pool(host.uri, host.storage_pool, host.storage_path)
    except driver.DriverError as exc:
        raise JobFailed(exc.code, f"{host.name}: {exc.message}") from exc
    return {"image": image.name, "host": host.name, "path": ensure_copy(ctx, image, host)}


def delete_image_copy(ctx: JobContext) -> dict:
    """The job that deletes a deleted image's volume from a host's pool (queued by
    ``images.delete_image`` for each host that had a copy)."""
    host = ctx.job.host
    volume = ctx.job.params.get("volume", "")
    if host is None:
        raise JobFailed(JobErrorCode.GONE, "The host is gone.")
    if not IMAGE_VOLUME.fullmatch(volume):
        raise JobFailed(
            JobErrorCode.BAD_VOLUME, f"{volume!r} is not the name of an image's volume."
        )
    if not real_storage(host):
        return {"simulated": True}
    deleted = host_call(driver.delete_volume, host.uri, host.storage_pool, volume)
    ctx.log(f"{'Deleted' if deleted else 'No'} volume {volume} on {host.name}")
    return {"host": host.name, "volume": volume, "deleted": deleted}


def ensure_copy(ctx: JobContext, image: Image, host: Host) -> str:
    """The path of ``image``'s volume on ``host``, copying it there first when needed.

    One job copies (whoever claims the ``ImageCopy`` row by a conditional insert or update);
    others needing it meanwhile wait for that copy, up to ``CORRAL_IMAGE_COPY_WAIT``. A claim
    older than that (its job died) is taken over.
    """
    deadline = time.monotonic() + settings.CORRAL_IMAGE_COPY_WAIT
    while True:
        token = _claim(image, host)
        if token is not None:
            return _copy(ctx, image, host, token)
        copy = ImageCopy.objects.filter(image=image, host=host).first()
        if copy is None:  # no claim could be had and no row is left: the image was deleted
            raise JobFailed(JobErrorCode.IMAGE_DELETED, f"Image {image.name} was deleted.")
        if copy.state == CopyState.READY:
            path = host_call(driver.volume_path, host.uri, host.storage_pool, image.volume_name)
            if path:
                return path
            ImageCopy.objects.filter(pk=copy.pk, state=CopyState.READY).update(
                state=CopyState.FAILED, error="The volume is gone from the host."
            )
            continue
        if time.monotonic() > deadline:
            raise JobFailed(
                JobErrorCode.TIMEOUT, f"Image {image.name} was still being copied to {host.name}."
            )
        ctx.check_cancelled()
        time.sleep(POLL_S * 5)


def _claim(image: Image, host: Host) -> uuid.UUID | None:
    """A token when this job is to copy the image (no copy yet, a failed one, or one whose
    copier died), else None."""
    token = uuid.uuid4()
    try:
        _copy_row, created = ImageCopy.objects.get_or_create(
            image=image, host=host, defaults={"state": CopyState.COPYING, "claimed_by": token}
        )
    except IntegrityError:  # another job inserted it first
        created = False
    if created:
        return token
    stale = timezone.now() - timedelta(seconds=settings.CORRAL_IMAGE_COPY_WAIT)
    taken = (
        ImageCopy.objects.filter(image=image, host=host)
        .filter(state=CopyState.FAILED)
        .update(state=CopyState.COPYING, claimed_by=token, error="", updated_at=timezone.now())
    ) or (
        ImageCopy.objects.filter(
            image=image, host=host, state=CopyState.COPYING, updated_at__lt=stale
        ).update(claimed_by=token, updated_at=timezone.now())
    )
    return token if taken else None


def _copy(ctx: JobContext, image: Image, host: Host, token: uuid.UUID) -> str:
    ctx.step(f"Copying image {image.name} to {host.name}", 0.35)
    mine = ImageCopy.objects.filter(image=image, host=host, claimed_by=token)
    if not image_path(image).is_file():
        message = (
            f"The file of image {image.name} is missing from the image store; upload it again."
        )
        mine.update(state=CopyState.FAILED, error=message)
        raise JobFailed(JobErrorCode.IMAGE_MISSING, message)
    try:
        path = driver.upload_image(
            host.uri,
            host.storage_pool,
            host.storage_path,
            image.volume_name,
            image.format,
            str(image_path(image)),
            image.sha256,
        )
    except (driver.DriverError, OSError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        mine.update(state=CopyState.FAILED, error=message[:500])
        code = getattr(exc, "code", JobErrorCode.COPY_FAILED)
        raise JobFailed(code, f"Copying image {image.name} to {host.name}: {message}") from exc
    with transaction.atomic():
        # Under the image's row lock, which images.delete_image takes first: either the delete
        # comes later, sees this copy's row and queues a job that removes the volume (made by
        # now), or the image is gone already and its volume is removed here. So none is left
        # behind whichever ends first, the copy or the delete's job.
        kept = Image.objects.select_for_update().filter(pk=image.pk).exists()
        if kept:
            mine.update(state=CopyState.READY, path=path, error="")
    if not kept:
        host_call(driver.delete_volume, host.uri, host.storage_pool, image.volume_name)
        ctx.log(f"Deleted volume {image.volume_name} on {host.name}: its image was deleted")
        raise JobFailed(
            JobErrorCode.IMAGE_DELETED,
            f"Image {image.name} was deleted while it was being copied to {host.name}; "
            "the copy was removed from the host.",
        )
    ctx.log(f"Image {image.name} is on {host.name} ({image.size_bytes} bytes, checksum matched)")
    return path
