"""Uploaded images: streamed into the image store, their format read from their content.

An upload goes through ``ImageUploadHandler``: each chunk is written to a hidden file in
``CORRAL_IMAGE_STORE`` and hashed as it arrives (nothing is held whole in memory); a file over
``CORRAL_IMAGE_MAX_BYTES`` is dropped at the first chunk past the limit. ``create_image`` then
reads the head of the file (qcow2 or raw for disks, a Linux boot image for kernels) and either
keeps it as an ``Image`` or removes it: a refused upload leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path
from uuid import UUID

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.db import IntegrityError, transaction
from django.db.models import Q

from hosts import jobs, quotas
from hosts.error_codes import HostErrorCode
from hosts.models import (
    Cluster,
    CopyState,
    Host,
    HostStatus,
    Image,
    ImageCopy,
    ImageFormat,
    ImageKind,
    ImageVisibility,
    Job,
    JobKind,
    Template,
    VirtualMachine,
)
from hosts.models.jobs import ACTIVE_JOB_STATES
from project.errors import Refused

HEAD_BYTES = 1024
UPLOAD_CHUNK_BYTES = 1024 * 1024
QCOW2_MAGIC = b"QFI\xfb"
QCOW2_CORRUPT = 1 << 1
QCOW2_EXTERNAL_DATA = 1 << 2
# Formats recognised only to be refused by name (convert them with qemu-img first).
FOREIGN_MAGIC = {
    b"KDMV": "VMDK",
    b"vhdxfile": "VHDX",
    b"conectix": "VHD",
    b"<<< Oracle VM VirtualBox Disk Image >>>": "VDI",
    b"\x1f\x8b": "gzip-compressed",
    b"\xfd7zXZ\x00": "xz-compressed",
    b"BZh": "bzip2-compressed",
    b"PK\x03\x04": "zip",
    b"\x28\xb5\x2f\xfd": "zstd-compressed",
}
COMPRESSED_INITRD = (b"\x1f\x8b", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"\x02\x21\x4c\x18")


def image_store() -> Path:
    store = Path(settings.CORRAL_IMAGE_STORE)
    store.mkdir(parents=True, exist_ok=True)
    return store


class StoredUpload(UploadedFile):
    """An uploaded file already written to the image store under a hidden temporary name."""

    def __init__(
        self,
        path: Path,
        name: str,
        size: int,
        sha256: str,
        head: bytes,
        *,
        md5: str = "",
        sha512: str = "",
    ):
        super().__init__(file=None, name=name, size=size)
        self.path, self.sha256, self.head = path, sha256, head
        self.md5, self.sha512 = md5, sha512

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


class ImageUploadHandler(FileUploadHandler):
    """Writes uploaded files straight into the image store, hashing them on the way."""

    def __init__(self, request=None):
        super().__init__(request)
        self.too_big = False
        self.stored: list[StoredUpload] = []

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        handle, path = tempfile.mkstemp(prefix=".upload-", dir=image_store())
        self._out = os.fdopen(handle, "wb")
        self._path = Path(path)
        self._hashes = [hashlib.sha256(), hashlib.md5(usedforsecurity=False), hashlib.sha512()]
        self._size = 0
        self._head = b""

    def receive_data_chunk(self, raw_data, start):
        self._size += len(raw_data)
        if self._size > settings.CORRAL_IMAGE_MAX_BYTES:
            self.too_big = True
            self._out.close()
            self._path.unlink(missing_ok=True)
            raise SkipFile
        if len(self._head) < HEAD_BYTES:
            self._head += raw_data[: HEAD_BYTES - len(self._head)]
        for digest in self._hashes:
            digest.update(raw_data)
        self._out.write(raw_data)
        return None

    def file_complete(self, file_size):
        self._out.close()
        sha256, md5, sha512 = (digest.hexdigest() for digest in self._hashes)
        upload = StoredUpload(
            self._path, self.file_name, self._size, sha256, self._head, md5=md5, sha512=sha512
        )
        self.stored.append(upload)
        return upload

    def discard_all(self) -> None:
        for upload in self.stored:
            upload.discard()

    def abandon(self) -> None:
        """Remove the file being received (an upload cut short)."""
        self._out.close()
        self._path.unlink(missing_ok=True)


def store_stream(stream, name: str) -> StoredUpload:
    """A raw upload (a request body that is the file itself) read from ``stream`` into the
    image store, as ``ImageUploadHandler`` stores multipart files: in chunks, hashed on the
    way, refused past ``CORRAL_IMAGE_MAX_BYTES``; nothing is left behind if reading fails."""
    handler = ImageUploadHandler()
    handler.new_file("file", name, "application/octet-stream", None)
    size = 0
    try:
        for chunk in iter(lambda: stream.read(UPLOAD_CHUNK_BYTES), b""):
            handler.receive_data_chunk(chunk, size)
            size += len(chunk)
    except SkipFile:
        raise Refused(
            HostErrorCode.IMAGE_TOO_BIG,
            f"The file is over the limit of {limit_text()}.",
            field="file",
        ) from None
    except BaseException:
        handler.abandon()
        raise
    return handler.file_complete(size)


def inspect(kind: str, head: bytes, size: int) -> tuple[str, int]:
    """The (format, virtual size) of an image from its first bytes; refuses what no VM can boot.

    Disks: qcow2 (without a backing file: a host must never be led to a file by an upload) or
    raw (whole 512-byte sectors). Kernels: a Linux boot image (``HdrS`` header). Initrds: a
    cpio archive or a compressed one.
    """
    if size == 0:
        raise Refused(HostErrorCode.EMPTY_IMAGE, "The file is empty.", field="file")
    if kind == ImageKind.DISK:
        if head.startswith(QCOW2_MAGIC):
            return ImageFormat.QCOW2, _qcow2_virtual_size(head)
        for magic, name in FOREIGN_MAGIC.items():
            if head.startswith(magic) or (name == "VDI" and magic in head[:128]):
                raise Refused(
                    HostErrorCode.UNKNOWN_FORMAT,
                    f"This is a {name} file; disks must be qcow2 or raw "
                    f"(qemu-img convert -O qcow2 …).",
                    field="file",
                )
        if size % 512:
            raise Refused(
                HostErrorCode.UNKNOWN_FORMAT,
                "Not a disk image: neither qcow2 nor raw (a raw disk is whole 512-byte sectors).",
                field="file",
            )
        return ImageFormat.RAW, size
    if kind == ImageKind.KERNEL:
        if head[0x202:0x206] != b"HdrS":
            raise Refused(
                HostErrorCode.UNKNOWN_FORMAT,
                "Not a Linux kernel (bzImage) the host can boot.",
                field="file",
            )
        return ImageFormat.RAW, size
    if not (head.startswith((b"070701", b"070702")) or head.startswith(COMPRESSED_INITRD)):
        raise Refused(
            HostErrorCode.UNKNOWN_FORMAT,
            "Not an initrd: a cpio archive, plain or gzip/xz/zstd/lz4-compressed.",
            field="file",
        )
    return ImageFormat.RAW, size


def _qcow2_virtual_size(head: bytes) -> int:
    if len(head) < 104:
        raise Refused(HostErrorCode.UNKNOWN_FORMAT, "A truncated qcow2 header.", field="file")
    version, backing_offset, _backing_size, _bits, virtual_size = struct.unpack(
        ">IQIIQ", head[4:32]
    )
    if version not in (2, 3):
        raise Refused(
            HostErrorCode.UNKNOWN_FORMAT, f"qcow2 version {version} is unknown.", field="file"
        )
    if backing_offset:
        raise Refused(
            HostErrorCode.BACKING_FILE,
            "This qcow2 image has a backing file; upload a standalone image "
            "(qemu-img convert -O qcow2 …).",
            field="file",
        )
    if version == 3:
        (incompatible,) = struct.unpack(">Q", head[72:80])
        if incompatible & QCOW2_EXTERNAL_DATA:
            # Its data would be read from a file named in the header, on the host.
            raise Refused(
                HostErrorCode.BACKING_FILE,
                "This qcow2 image keeps its data in an external file; upload a standalone "
                "image (qemu-img convert -O qcow2 …).",
                field="file",
            )
        if incompatible & QCOW2_CORRUPT:
            raise Refused(
                HostErrorCode.CORRUPT_IMAGE, "This qcow2 image is marked corrupt.", field="file"
            )
    return virtual_size


def create_image(
    upload: StoredUpload,
    *,
    name: str,
    kind: str,
    cluster: Cluster | None = None,
    description: str = "",
    declared_format: str = "",
    user=None,
    uuid: UUID | None = None,
    visibility: str = ImageVisibility.PUBLIC,
) -> Image:
    """Keep an upload as an image, or remove it and refuse: never a row without its file nor
    a file without its row. ``uuid`` is its id in Glance's API (a new one unless given). The
    uploader (``user``) owns it; who may give it which ``visibility`` is the caller's to check
    (``hosts.image_access``)."""
    try:
        image_format, virtual_size = inspect(kind, upload.head, upload.size)
        if declared_format and declared_format != image_format:
            raise Refused(
                HostErrorCode.FORMAT_MISMATCH,
                f"The file is {image_format}, not {declared_format}.",
                field="format",
            )
        uploader = user if user is not None and user.is_authenticated else None
        with transaction.atomic():
            quotas.charge(uploader, quotas.for_image(upload.size))
            image = Image.objects.create(
                name=name,
                kind=kind,
                cluster=cluster,
                description=description,
                format=image_format,
                size_bytes=upload.size,
                virtual_size_bytes=virtual_size,
                sha256=upload.sha256,
                md5=upload.md5,
                sha512=upload.sha512,
                file="",
                uploaded_by=uploader,
                owner=uploader,
                visibility=visibility,
                **({"uuid": uuid} if uuid is not None else {}),
            )
            image.file = f"image-{image.pk}-{upload.sha256[:12]}"
            image.save(update_fields=["file"])
            os.replace(upload.path, image_store() / image.file)
    except IntegrityError as exc:
        upload.discard()
        raise Refused(
            HostErrorCode.NAME_TAKEN, "An image with this name exists already.", field="name"
        ) from exc
    except BaseException:
        upload.discard()
        raise
    return image


def distribute(template: Template, cluster_id: int, *, requested_by=None) -> list:
    """Queue a copy of each of the template's images to each real host of the cluster that
    has none ready and none on the way (a pool's hosts get them before any VM needs them).
    Hosts set to share storage hold one copy in their pool folder: one of them gets the job,
    unless one of them has the copy or has it coming."""
    wanted = [
        image
        for image in (template.disk_image, template.kernel_image, template.initrd_image)
        if image is not None
    ]
    if not wanted:
        return []
    hosts = Host.objects.filter(cluster_id=cluster_id, status=HostStatus.UP).exclude(domain_type="")
    queued = []
    served: set[str] = set()
    for host in hosts.order_by("pk"):
        if host.shared_storage in served:
            continue
        if host.shared_storage:
            served.add(host.shared_storage)
        sharing = host.sharing_storage()
        have = set(
            ImageCopy.objects.filter(
                host__in=sharing, state__in=[CopyState.READY, CopyState.COPYING]
            ).values_list("image_id", flat=True)
        )
        coming = {
            params.get("image")
            for params in Job.objects.filter(
                host__in=sharing, kind=JobKind.COPY_IMAGE, state__in=ACTIVE_JOB_STATES
            ).values_list("params", flat=True)
        }
        for image in wanted:
            if image.pk not in have and image.pk not in coming:
                queued.append(
                    jobs.submit(
                        JobKind.COPY_IMAGE,
                        host=host,
                        params={"image": image.pk},
                        requested_by=requested_by,
                    )
                )
    return queued


def image_path(image: Image) -> Path:
    return image_store() / image.file


def ensure_digests(image: Image) -> Image:
    """Fill the MD5 and SHA-512 of an image stored before they were kept, from its file (once:
    they are saved). Left empty while the file cannot be read."""
    if (image.md5 and image.sha512) or not image.file:
        return image  # kept already, or no file yet (being made from a VM)
    md5, sha512 = hashlib.md5(usedforsecurity=False), hashlib.sha512()
    try:
        with open(image_path(image), "rb") as source:
            for chunk in iter(lambda: source.read(1024 * 1024), b""):
                md5.update(chunk)
                sha512.update(chunk)
    except OSError:
        return image
    image.md5, image.sha512 = md5.hexdigest(), sha512.hexdigest()
    Image.objects.filter(pk=image.pk).update(md5=image.md5, sha512=image.sha512)
    return image


def _templates_using(using, requested_by) -> str:
    """Why an image is not deleted: the templates using it, named when they are the admins'
    or the requester's own, counted when they are other users' (private to them)."""
    named = Q(owner__isnull=True) | Q(owner_id=getattr(requested_by, "pk", None))
    names = list(using.filter(named).values_list("name", flat=True)[:5])
    others = using.exclude(named).count()
    if others:
        names.append(f"{others} template{'s' if others > 1 else ''} of other users")
    return f"Templates use this image: {', '.join(names)}; change them first."


def delete_image(image: Image, *, requested_by=None) -> list:
    """Delete an image no template and no VM uses: its row and file, and a job per host that holds a
    copy (or is copying one) to delete that volume from the host's pool. Returns the jobs."""
    using = (
        Template.objects.filter(disk_image=image)
        | Template.objects.filter(kernel_image=image)
        | Template.objects.filter(initrd_image=image)
    )
    if using.exists():
        raise Refused(HostErrorCode.IMAGE_IN_USE, _templates_using(using, requested_by))
    vm_names = list(
        VirtualMachine.objects.filter(disk_image=image).values_list("name", flat=True)[:5]
    )
    if vm_names:
        raise Refused(
            HostErrorCode.IMAGE_IN_USE,
            f"VMs boot from this image: {', '.join(vm_names)}; delete them first.",
        )
    path = image_path(image)
    volume = image.volume_name
    with transaction.atomic():
        # The image's row is locked first: a copy that claims a host's row after this waits and
        # then finds the image gone, and one that ends meanwhile waits and removes its volume
        # itself (operations.disks), so every copy is either listed here or cleans up after.
        if not Image.objects.select_for_update().filter(pk=image.pk).exists():
            return []
        hosts = list(Host.objects.filter(image_copies__image=image).distinct().order_by("pk"))
        image.delete()
        queued = [
            jobs.submit(
                JobKind.DELETE_IMAGE,
                host=host,
                params={"volume": volume},
                requested_by=requested_by,
            )
            for host in hosts
        ]
        if image.file:  # none yet while it is being made from a VM (its job removes its copy)
            transaction.on_commit(lambda: path.unlink(missing_ok=True))
    return queued


def limit_text() -> str:
    limit = settings.CORRAL_IMAGE_MAX_BYTES
    return f"{limit / 1024**3:.1f} GiB" if limit >= 1024**3 else f"{limit} bytes"
