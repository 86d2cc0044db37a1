"""Glance's writes: queue an image, upload its data (which makes the Corral image), change its
Glance fields, delete it. Permissions are the views' to check; Corral's own rules (formats,
sizes, images in use) are hosts.images', reached through its use cases."""

from __future__ import annotations

import dataclasses
import re

from django.core.exceptions import ValidationError
from django.db import transaction

from hosts import image_access, images, quotas
from hosts.models import Image, ImageKind
from openstack.image.base import GlanceRefusal
from openstack.image.queries import Entry
from openstack.models import GlanceImage
from project.errors import Refused
from project.names import validate_object_name

KIND_OF_DISK_FORMAT = {"aki": ImageKind.KERNEL, "ari": ImageKind.INITRD}
NAME_LENGTH = 64


def check_visibility(user, image: Image, visibility: str) -> None:
    """Glance's refusal of a visibility only admins give (public, or taking it back)."""
    try:
        image_access.check_visibility(user, image, visibility)
    except Refused:
        raise GlanceRefusal(
            403, "You are not authorized to complete publicize_image action."
        ) from None


def queue_image(owner, fields: dict) -> GlanceImage:
    """A queued image (no data yet) with Glance's ``fields``, owned by ``owner``."""
    if fields.get("visibility"):
        check_visibility(owner, Image(cluster=None, visibility=""), fields["visibility"])
    else:
        fields["visibility"] = image_access.default_visibility(owner)
    with transaction.atomic():
        _charge_queued(owner)
        wanted = fields.get("id")
        if wanted and (
            GlanceImage.objects.filter(id=wanted).exists()
            or Image.objects.filter(uuid=wanted).exists()
        ):
            raise GlanceRefusal(409, f"Image with identifier {wanted} already exists!")
        return GlanceImage.objects.create(owner=owner, **fields)


def queued_of(owner) -> int:
    """How many of ``owner``'s Glance images wait for their data."""
    return GlanceImage.objects.filter(owner=owner, image__isnull=True).count()


def _charge_queued(owner) -> None:
    """Count one more image against ``owner``'s images limit, as Glance counts a queued image
    in ``image_count_total``: their images and their queued ones; past it, Glance's 413
    (``quotas.QuotaExceeded``). Their row stays locked until the caller's transaction ends."""
    limits = quotas.lock_limits(owner)
    if limits["images"] is None:
        return
    used = quotas.usage(owner)
    used = dataclasses.replace(used, images=used.images + queued_of(owner))
    quotas.check(limits, used, quotas.Resources(images=1))


def corral_name(glance: GlanceImage) -> str:
    """The Corral name of an image made through Glance: its Glance name when that is a valid
    name no image has, else one made from it and its id (Glance names are free text and may
    repeat; Corral's name libvirt volumes and are unique)."""
    name = glance.name or ""
    try:
        validate_object_name(name)
    except ValidationError:
        pass
    else:
        if not Image.objects.filter(name=name).exists():
            return name
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[: NAME_LENGTH - 10]
    derived = f"{stem or 'image'}-{glance.id.hex[:8]}"
    if Image.objects.filter(name=derived).exists():
        derived = f"image-{glance.id.hex}"
    return derived


def upload_data(glance: GlanceImage, stream, user) -> Image:
    """Read a queued image's data from ``stream`` into the image store and keep it as the Corral
    image with the queued image's id; refused (the image stays queued, nothing stored) when
    the content is no image of its format, or over the size limit."""
    upload = images.store_stream(stream, f"glance-{glance.id}")
    try:
        with transaction.atomic():
            row = GlanceImage.objects.select_for_update().filter(pk=glance.pk).first()
            if row is None:
                raise GlanceRefusal(404, f"Image {glance.id} was deleted during the upload.")
            if row.image_id is not None:
                raise GlanceRefusal(
                    409, "Image status transition from active to saving is not allowed."
                )
            image = images.create_image(
                upload,
                name=corral_name(row),
                kind=KIND_OF_DISK_FORMAT.get(row.disk_format, ImageKind.DISK),
                declared_format=row.disk_format if row.disk_format in ("qcow2", "raw") else "",
                description=f"Uploaded through Glance's API as {row.name!r}."
                if row.name
                else "Uploaded through Glance's API.",
                user=user,
                uuid=row.id,
                visibility=row.visibility or image_access.default_visibility(user),
            )
            row.image = image
            row.save(update_fields=["image", "updated_at"])
    finally:
        upload.discard()  # whatever create_image did not keep
    return image


def delete_entry(entry: Entry, user) -> None:
    """Delete a queued image, or a Corral image (refused while a template or VM uses it)."""
    if entry.image is not None:
        images.delete_image(entry.image, requested_by=user)
    else:
        entry.glance.delete()


def settable_fields(entry: Entry) -> dict:
    """The fields a patch starts from: the core ones and the extra properties."""
    glance = entry.glance
    if glance is None:
        return {
            "name": entry.name,
            "min_disk": 0,
            "min_ram": 0,
            "tags": [],
            "visibility": entry.visibility,
        }
    return {
        **glance.properties,
        "visibility": entry.visibility,
        "name": glance.name,
        "disk_format": glance.disk_format,
        "container_format": glance.container_format,
        "min_disk": glance.min_disk,
        "min_ram": glance.min_ram,
        "tags": list(glance.tags),
    }


def update_entry(entry: Entry, fields: dict, user) -> GlanceImage:
    """Keep an image's Glance fields (a Corral image made through its own API gets its Glance
    row now, with its Corral name until renamed). Corral's own name stays as it is; its
    visibility is the Corral image's (only admins publish)."""
    visibility = fields.pop("visibility", None) or entry.visibility
    with transaction.atomic():
        if entry.image is not None:
            check_visibility(user, entry.image, visibility)
            image_access.set_visibility(user, entry.image, visibility)
        else:
            if visibility != entry.visibility:
                check_visibility(user, Image(cluster=None, visibility=""), visibility)
            fields["visibility"] = visibility
        glance = entry.glance
        if glance is None:
            image = entry.image
            glance, _ = GlanceImage.objects.get_or_create(
                id=image.uuid,
                defaults={"image": image, "owner": image.uploaded_by, "name": image.name},
            )
        else:
            glance = GlanceImage.objects.select_for_update().get(pk=glance.pk)
        for key, value in fields.items():
            setattr(glance, key, value)
        glance.save()
    return glance
