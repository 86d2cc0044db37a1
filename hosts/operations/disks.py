"""A VM's disks on a real host: the images it boots from copied into the host's storage pool
(once per image and pool folder, however many jobs and hosts sharing it need them at once) and
its own qcow2 overlay.

``boot_for`` is a job step of starting, preparing or moving a VM; ``reset_disk`` recreates the
overlay (a stateless pool's VM boots from its base again); ``remove_disk`` deletes it with the
VM; ``storage_shared`` says whether two hosts' pools are one folder, as set and as the hosts
show it, before a VM moves between them. Hosts that keep no disks (simulated hosts) skip these
steps.
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


def boot_for(ctx: JobContext, vm: VirtualMachine, host: Host, *, disk: str = "make") -> dict:
    """The images on the host and the VM's overlay: made now unless it exists (``make``),
    made afresh (``afresh``), or only looked up (``existing``: it must be there, as on storage
    the VM's host shares). Returns the domain spec's boot fields ({} on a simulated host)."""
    if not real_storage(host):
        return {}
    template = vm.template
    ctx.step(f"Preparing the storage pool {host.storage_pool} on {host.name}", 0.3)
    _ensure_pool(host)
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
    if disk == "existing":
        path = host_call(driver.volume_path, host.uri, host.storage_pool, disk_name(vm))
        if path is None:
            raise JobFailed(
                JobErrorCode.STORAGE_NOT_SHARED,
                f"{host.name} does not see the VM's disk {disk_name(vm)} in its storage pool "
                f"{host.storage_pool}, though it is set to share storage {host.shared_storage}.",
            )
    else:
        afresh = disk == "afresh"
        ctx.step(("Recreating" if afresh else "Preparing") + f" the VM's disk on {host.name}", 0.4)
        path = host_call(
            lambda: driver.create_disk(
                host.uri,
                host.storage_pool,
                disk_name(vm),
                vm.disk_gb * GIB,
                backing,
                replace=afresh,
            )
        )
    user_nic = not template.networks and not template.bridge and not host.reported_networks
    ssh_port = ssh.claim_port(vm, host) if user_nic else None
    if user_nic and ssh_port is None and host.guest_ssh_port_min is not None:
        ctx.log(f"{host.name} has no guest SSH port free: the guest's SSH stays unpublished")
    return {
        "disk_path": path,
        "kernel": paths.get("kernel_image", ""),
        "initrd": paths.get("initrd_image", ""),
        "cmdline": template.kernel_cmdline,
        "user_nic": user_nic,
        "ssh_forward_port": ssh_port,
        "ssh_forward_listen": ssh.forward_listen_address(host),
    }


def reset_disk(ctx: JobContext, vm: VirtualMachine) -> dict:
    return boot_for(ctx, vm, vm.host, disk="afresh")


def _ensure_pool(host: Host) -> None:
    try:
        driver.ensure_pool(host.uri, host.storage_pool, host.storage_path)
    except driver.DriverError as exc:
        raise JobFailed(exc.code, f"{host.name}: {exc.message}") from exc


def storage_shared(ctx: JobContext, source: Host, destination: Host) -> bool:
    """Whether the two hosts' pools are one folder, so a VM moves between them without its
    disk: both are set to share the same storage, and they show it (a volume made through the
    source is seen through the destination). When the setting and the hosts disagree the job
    fails before anything is made, moved or removed: copying a disk into the folder it is in
    would replace it, and leaving it behind on a host that does not share it would lose it."""
    name = source.shared_storage
    claimed = bool(name) and name == destination.shared_storage
    _ensure_pool(destination)
    seen = host_call(
        driver.sees_same_storage,
        source.uri,
        source.storage_pool,
        destination.uri,
        destination.storage_pool,
    )
    if claimed and not seen:
        raise JobFailed(
            JobErrorCode.STORAGE_NOT_SHARED,
            f"{source.name} and {destination.name} are set to share storage {name}, but "
            f"{destination.name}'s storage pool {destination.storage_pool} is not the folder of "
            f"{source.name}'s pool {source.storage_pool}: check the hosts' mounts, or their "
            "shared storage setting.",
        )
    if seen and not claimed:
        raise JobFailed(
            JobErrorCode.STORAGE_SHARED_UNSET,
            f"The storage pools of {source.name} and {destination.name} are one folder, but "
            "the hosts are not set to share storage (the same shared storage name on both): "
            "copying the VM's disk there would replace the disk itself.",
        )
    if claimed:
        ctx.log(
            f"{source.name} and {destination.name} share storage {name}: the VM's disk stays "
            "where it is"
        )
    return claimed


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
    older than that (its job died) is taken over. Hosts set to share storage hold one copy in
    their pool folder: it is claimed on the row of the first of them (by id), and a host that
    finds a copy of any of them there records it as its own without copying; one that does not
    find it there makes the copy afresh.
    """
    sharing = list(host.sharing_storage().order_by("pk").values_list("pk", flat=True))
    keeper = host if sharing[0] == host.pk else Host.objects.get(pk=sharing[0])
    deadline = time.monotonic() + settings.CORRAL_IMAGE_COPY_WAIT
    while True:
        ready = ImageCopy.objects.filter(image=image, host_id__in=sharing, state=CopyState.READY)
        if ready.exists():
            path = host_call(driver.volume_path, host.uri, host.storage_pool, image.volume_name)
            if path:
                return path if ready.filter(host=host).exists() else _recorded(image, host, path)
            ready.update(state=CopyState.FAILED, error="The volume is gone from the host.")
            continue
        token = _claim(image, keeper)
        if token is not None:
            path = _copy(ctx, image, host, token, keeper)
            return path if keeper == host else _recorded(image, host, path)
        if not ImageCopy.objects.filter(image=image, host=keeper).exists():
            # No claim could be had and no row is left: the image was deleted.
            raise JobFailed(JobErrorCode.IMAGE_DELETED, f"Image {image.name} was deleted.")
        if time.monotonic() > deadline:
            raise JobFailed(
                JobErrorCode.TIMEOUT, f"Image {image.name} was still being copied to {host.name}."
            )
        ctx.check_cancelled()
        time.sleep(POLL_S * 5)


def _recorded(image: Image, host: Host, path: str) -> str:
    """``path``, the image's volume as ``host`` sees it, recorded as the host's ready copy (a
    host sharing storage found it in the folder another host's copy went to)."""
    try:
        ImageCopy.objects.update_or_create(
            image=image, host=host, defaults={"state": CopyState.READY, "path": path, "error": ""}
        )
    except IntegrityError as exc:  # the image was deleted meanwhile
        raise JobFailed(JobErrorCode.IMAGE_DELETED, f"Image {image.name} was deleted.") from exc
    return path


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


def _copy(ctx: JobContext, image: Image, host: Host, token: uuid.UUID, claimed: Host) -> str:
    """Copy the image through ``host``, on the claim ``token`` of ``claimed``'s row (the host
    itself, or the first of the hosts it shares storage with)."""
    ctx.step(f"Copying image {image.name} to {host.name}", 0.35)
    mine = ImageCopy.objects.filter(image=image, host=claimed, claimed_by=token)
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
