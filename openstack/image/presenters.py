"""Glance's image document of an image (active, saving or queued), extra properties at the top
level as Glance puts them."""

from __future__ import annotations

from datetime import UTC

from hosts import images
from hosts.models import ImageKind
from openstack.image.queries import Entry

# Glance's disk formats of Corral's kinds other than disks (a disk shows its own format).
DISK_FORMAT_OF_KIND = {ImageKind.KERNEL: "aki", ImageKind.INITRD: "ari"}
HASH_ALGORITHM = "sha512"


def _time(moment) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def image_view(entry: Entry) -> dict:
    """Glance's image document (extra properties at the top level, as Glance puts them)."""
    image, glance = entry.image, entry.glance
    if image is not None:
        images.ensure_digests(image)
        disk_format = DISK_FORMAT_OF_KIND.get(image.kind, image.format)
    else:
        disk_format = glance.disk_format
    data = image if entry.has_data else None  # what only an image with data says
    view = dict(glance.properties) if glance is not None else {}
    view.update(
        {
            "id": entry.id,
            "name": entry.name,
            "status": entry.status,
            "visibility": entry.visibility,
            "protected": False,
            "os_hidden": False,
            "disk_format": disk_format,
            "container_format": (glance.container_format if glance is not None else None)
            or ("bare" if image is not None else None),
            "size": entry.size,
            "virtual_size": None if data is None else data.virtual_size_bytes,
            "checksum": (data.md5 or None) if data is not None else None,
            "os_hash_algo": HASH_ALGORITHM if data is not None and data.sha512 else None,
            "os_hash_value": (data.sha512 or None) if data is not None else None,
            "owner": entry.owner,
            "min_disk": glance.min_disk if glance is not None else 0,
            "min_ram": glance.min_ram if glance is not None else 0,
            "tags": entry.tags,
            "created_at": _time(entry.created_at),
            "updated_at": _time(entry.updated_at),
            "self": f"/v2/images/{entry.id}",
            "file": f"/v2/images/{entry.id}/file",
            "schema": "/v2/schemas/image",
        }
    )
    return view
