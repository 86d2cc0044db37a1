"""Images made from VMs: a VM's disk as it is now becomes an image of whoever asked (Nova's
createImage, the portal's "Make an image"), and an admin's template with it (oVirt's "Make
Template").

``request_image`` reserves the image at once, in one transaction with the VM's row locked: its
name, one image of its owner's quota, and a row ``saving`` with no file (so its id is known,
and Glance shows it saving, as Glance's own images go queued, saving, active); then it queues
the job that makes it on the VM's queue (``hosts.operations.vm_image``). The job's copy
becomes the image's file through ``keep``, which counts its size against the owner's quota
in the transaction that makes the row ``ready``. A job that ends any other way (failed,
cancelled, reaped) leaves nothing: ``discard_unsaved`` (on ``job_finished``) deletes a row
still saving, and the job removes its own files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from django.db import IntegrityError, transaction

from hosts import checks, driver, image_access, images, jobs, quotas
from hosts.error_codes import HostErrorCode, JobErrorCode
from hosts.guests.consoles import OPERATE
from hosts.models import (
    Cluster,
    Image,
    ImageFormat,
    ImageKind,
    ImageStatus,
    ImageVisibility,
    Job,
    JobKind,
    JobState,
    Template,
    VirtualMachine,
    VmStatus,
)
from hosts.models.jobs import ACTIVE_JOB_STATES
from project.access.permissions import holds
from project.errors import Refused

# What a VM may be when an image of it is asked for (and no job is queued on it): stopped, or
# running (copied live when its agent can freeze its filesystems, else stopped and started
# again). A paused guest can neither be frozen nor shut down cleanly.
IMAGE_FROM = {VmStatus.DOWN, VmStatus.UP}
# What an image being saved counts for its size until its size is known: enough that a user
# with no image storage left is refused before anything is copied.
SIZE_UNTIL_KNOWN = 1
# The template fields an admin's "Make a template" copies from the VM's own template (its
# CPUs, memory and disk are the VM's).
TEMPLATE_FIELDS = (
    "networks",
    "bridge",
    "login_user",
    "os_type",
    "kernel_cmdline",
    "graphics",
    "guest_agent",
    "user_data",
)


def may_make_image(user, vm: VirtualMachine) -> bool:
    """Whether ``user`` may make an image of ``vm``: its holder, or whoever may operate it."""
    return (vm.owner_id is not None and vm.owner_id == user.pk) or holds(user, OPERATE, vm)


@dataclass(frozen=True)
class TemplateRequest:
    """The template an admin asks for with the image: its name, and where it is offered."""

    name: str
    cluster: Cluster | None = None
    description: str = ""


def request_image(
    vm: VirtualMachine,
    *,
    name: str,
    requested_by,
    visibility: str = "",
    description: str = "",
    cluster: Cluster | None = None,
    template: TemplateRequest | None = None,
    uuid: UUID | None = None,
) -> tuple[Job, Image]:
    """Queue the job that makes an image of ``vm``'s disk, owned by ``requested_by`` (private
    unless ``visibility`` says otherwise, by ``hosts.image_access``'s rules); with
    ``template``, the template made from it too; ``uuid`` is its id in Glance's API (a new
    one unless given). Returns the job and the image, saving.

    Refused, with nothing made: a name taken (400 on ``name``, or ``template_name``), a
    visibility the caller may not give (400 on ``visibility``), a VM paused or on its way
    somewhere with no job queued that would settle it (409), one that never ran (it has no
    disk of its own), the caller's image quota full (409)."""
    with transaction.atomic():
        vm = VirtualMachine.objects.select_for_update().select_related("template").get(pk=vm.pk)
        _check_vm(vm)
        visibility = visibility or ImageVisibility.PRIVATE
        image_access.check_visibility(
            requested_by, Image(cluster=cluster, visibility=""), visibility
        )
        if Image.objects.filter(name=name).exists():
            raise Refused(
                HostErrorCode.NAME_TAKEN, "An image with this name exists already.", field="name"
            )
        if template is not None and Template.objects.filter(name=template.name).exists():
            raise Refused(
                HostErrorCode.NAME_TAKEN,
                "A template with this name exists already.",
                field="template_name",
            )
        for rule in checks.operation_rules:
            rule(vm, JobKind.IMAGE_FROM_VM, requested_by)
        owner = requested_by if requested_by.is_authenticated else None
        quotas.charge(owner, quotas.Resources(images=1, image_gb=SIZE_UNTIL_KNOWN / quotas.GIB))
        try:
            with transaction.atomic():
                image = Image.objects.create(
                    name=name,
                    kind=ImageKind.DISK,
                    cluster=cluster,
                    description=description or f"Made from VM {vm.name}.",
                    format=ImageFormat.QCOW2,
                    size_bytes=0,
                    virtual_size_bytes=0,
                    sha256="",
                    file="",
                    status=ImageStatus.SAVING,
                    uploaded_by=owner,
                    owner=owner,
                    visibility=visibility,
                    **({"uuid": uuid} if uuid is not None else {}),
                )
        except IntegrityError as exc:
            raise Refused(
                HostErrorCode.NAME_TAKEN, "An image with this name exists already.", field="name"
            ) from exc
        params = {"image": image.pk}
        if template is not None:
            params["template"] = {
                "name": template.name,
                "cluster": template.cluster.pk if template.cluster is not None else None,
                "description": template.description,
            }
        job = jobs.submit(
            JobKind.IMAGE_FROM_VM, vm=vm, params=params, requested_by=requested_by, coalesce=False
        )
    return job, image


def _check_vm(vm: VirtualMachine) -> None:
    """Refuse a VM whose disk cannot be copied now (unless jobs queued on it decide first)."""
    if Job.objects.filter(vm=vm, state__in=ACTIVE_JOB_STATES).exists():
        return  # the queue decides: the job looks at the VM when its turn comes
    if vm.status not in IMAGE_FROM:
        raise Refused(
            HostErrorCode.BAD_STATE,
            f"VM {vm.name} is {vm.get_status_display()}; an image is made of a VM that is "
            "running or shut down.",
        )
    if vm.host_id is None:
        raise Refused(
            HostErrorCode.NO_DISK_YET,
            f"VM {vm.name} has never run, so it has no disk of its own yet: start it once, or "
            "use its template's image.",
        )


def saving(image_id) -> Image | None:
    """The image ``image_id`` if it is still to be made (saving), else None."""
    return Image.objects.filter(pk=image_id, status=ImageStatus.SAVING).first()


def staging_path(image: Image) -> Path:
    """Where the job puts the copy of the disk before it is the image's file: a hidden file in
    the image store (the same file system, so keeping it is a rename)."""
    return images.image_store() / f".from-vm-{image.pk}.qcow2"


def keep(image_id: int, path: Path, copy: driver.DiskCopy) -> Image:
    """Make the copy at ``path`` (its size and digests taken as it was written: ``copy``) image
    ``image_id``'s file, the image ready. The same format checks as an upload's (a qcow2
    without a backing file: the copy is standalone), its size counted against its owner's
    quota in this transaction (``QuotaExceeded``: nothing kept). Refused ``image_deleted`` when
    the image was deleted meanwhile."""
    image_format, virtual_size = images.inspect(ImageKind.DISK, copy.head, copy.size)
    with transaction.atomic():
        image = Image.objects.select_for_update().filter(pk=image_id).first()
        if image is None or image.status != ImageStatus.SAVING:
            raise Refused(
                JobErrorCode.IMAGE_DELETED, "The image was deleted while it was being made."
            )
        quotas.charge(image.owner, quotas.Resources(image_gb=copy.size / quotas.GIB))
        image.format = image_format
        image.size_bytes, image.virtual_size_bytes = copy.size, virtual_size
        image.sha256, image.md5, image.sha512 = copy.sha256, copy.md5, copy.sha512
        image.file = f"image-{image.pk}-{copy.sha256[:12]}"
        image.status = ImageStatus.READY
        image.save()
        os.replace(path, images.image_store() / image.file)
    return image


def make_template(image: Image, vm: VirtualMachine, asked: dict) -> Template:
    """The template an admin asked for with ``image`` (``asked``: its name, cluster and
    description): the VM's CPUs, memory and disk, its template's devices, kernel, login user
    and agent, and ``image`` as its disk. Checked as any template is (a name taken since the
    request is a ``ValidationError``)."""
    source = vm.template
    template = Template(
        name=asked["name"],
        description=asked.get("description") or f"Made from VM {vm.name}.",
        cluster_id=asked.get("cluster"),
        vcpus=vm.vcpus,
        memory_mb=vm.memory_mb,
        disk_gb=vm.disk_gb,
        disk_image=image,
        kernel_image=source.kernel_image,
        initrd_image=source.initrd_image,
        **{field: getattr(source, field) for field in TEMPLATE_FIELDS},
    )
    with transaction.atomic():
        template.full_clean()
        template.save()
    return template


def discard_unsaved(sender=None, job: Job | None = None, **kwargs) -> None:
    """``job_finished``: a job that made no image (it failed, was cancelled or reaped) leaves
    no image behind: its row, still saving, is deleted (with its place in the quota)."""
    if job is None or job.kind != JobKind.IMAGE_FROM_VM or job.state == JobState.SUCCEEDED:
        return
    Image.objects.filter(pk=(job.params or {}).get("image"), status=ImageStatus.SAVING).delete()
