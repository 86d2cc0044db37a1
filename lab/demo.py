"""The lab's part of the demo: the tiny guest's images, a template booting them and (through
the pools' seeder) a pool with one VM kept running on the lab's real QEMU host.

Runs only when the demo names a lab cluster (``seed_demo --lab lab``), which ``make run``
does once its QEMU host is up. The images go into the image store through the service the
upload API uses (``hosts.images.create_image``); a second run reuses them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from hosts import images
from hosts.models import Cluster, Image, Template
from lab import tinyguest
from project import demo

TEMPLATE = "tiny-qemu"
# tty0 shows the kernel on the VNC screen, ttyS0 (the last one: init's console) in the log.
KERNEL_CMDLINE = "console=tty0 console=ttyS0"


def stored_upload(path: Path) -> images.StoredUpload:
    """A copy of ``path`` in the image store, as an upload the API would have received."""
    handle, temporary = tempfile.mkstemp(prefix=".upload-", dir=images.image_store())
    digest = hashlib.sha256()
    with os.fdopen(handle, "wb") as out, open(path, "rb") as source:
        head = source.read(images.HEAD_BYTES)
        source.seek(0)
        for chunk in iter(lambda: source.read(1024 * 1024), b""):
            digest.update(chunk)
            out.write(chunk)
    return images.StoredUpload(
        Path(temporary), path.name, path.stat().st_size, digest.hexdigest(), head
    )


def register_image(path: Path, name: str, kind: str) -> Image:
    """The image ``name``, uploaded from ``path`` unless it exists already."""
    existing = Image.objects.filter(name=name).first()
    if existing is not None:
        return existing
    return images.create_image(
        stored_upload(path), name=name, kind=kind, description="The tiny guest (make run)"
    )


def seed(options: dict) -> str:
    lab = options.get("lab")
    if not lab:
        return "Demo: no lab cluster (no real QEMU host)."
    cluster, _ = Cluster.objects.get_or_create(
        name=lab, defaults={"description": "Real QEMU hosts"}
    )
    try:
        guest = tinyguest.build()
    except tinyguest.TinyGuestError as exc:  # e.g. no network to fetch its Debian packages
        return f"Demo: no template in cluster {cluster.name}: the tiny guest was not built ({exc})."
    kernel = register_image(guest.kernel, "tiny-kernel", "kernel")
    initrd = register_image(guest.initrd, "tiny-initrd", "initrd")
    disk = register_image(guest.disk, "tiny-disk", "disk")
    template, _ = Template.objects.get_or_create(
        name=TEMPLATE,
        defaults={
            "description": "The tiny guest (busybox, QEMU guest agent): boots in seconds",
            "vcpus": 1,
            "memory_mb": 128,
            "disk_gb": 1,
            "kernel_image": kernel,
            "initrd_image": initrd,
            "disk_image": disk,
            "kernel_cmdline": KERNEL_CMDLINE,
            "graphics": "vnc",
            "guest_agent": True,
            "login_user": tinyguest.LOGIN_USER,
        },
    )
    if not template.login_user:  # made by an earlier version of the demo
        Template.objects.filter(pk=template.pk).update(login_user=tinyguest.LOGIN_USER)
    options["lab_obj"], options["lab_template"] = cluster, template
    return f"Demo: template {template.name} booting the tiny guest in cluster {cluster.name}."


def register() -> None:
    demo.register("lab", seed, rank=12)
