"""Corral's images as Glance sees them: which a user may see, found by id, and their Glance
fields (shown by presenters.py). An image made through Corral's own API has its Corral name;
one made through Glance its Glance name and fields (``openstack.models.GlanceImage``), and is
"queued" until its data is uploaded.

Other OpenStack APIs (Compute's imageRef) resolve an image with ``find_image``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Q

from hosts import image_access
from hosts.models import Image, ImageStatus, ImageVisibility
from openstack.compute.queries import pool_templates
from openstack.models import GlanceImage


class ImageNotFound(LookupError):
    """No image of that id that the user may see."""


class ImageNotActive(LookupError):
    """The image exists but has no data yet (queued, or saving from a server)."""


@dataclass(frozen=True)
class Entry:
    """One image of Glance's list: a Corral image (``image``, with its Glance row if it was made
    through Glance) or a queued Glance image (``glance`` alone)."""

    image: Image | None
    glance: GlanceImage | None

    @property
    def id(self) -> str:
        return str(self.image.uuid if self.image is not None else self.glance.id)

    @property
    def name(self) -> str | None:
        return self.glance.name if self.glance is not None else self.image.name

    @property
    def status(self) -> str:
        """Glance's status: queued (no data yet), saving (being made from a server), active."""
        if self.image is None:
            return "queued"
        return "saving" if self.image.status == ImageStatus.SAVING else "active"

    @property
    def has_data(self) -> bool:
        return self.status == "active"

    @property
    def visibility(self) -> str:
        if self.image is not None:
            return self.image.visibility
        return self.glance.visibility or ImageVisibility.PRIVATE

    @property
    def owner(self) -> str | None:
        """Glance's owner: the owning user's project (the user's id); none for the admins'."""
        owner_id = self.image.owner_id if self.image is not None else self.glance.owner_id
        return None if owner_id is None else str(owner_id)

    @property
    def created_at(self):
        return (self.glance or self.image).created_at

    @property
    def updated_at(self):
        moments = [row.updated_at for row in (self.image, self.glance) if row is not None]
        return max(moments)

    @property
    def size(self) -> int | None:
        return self.image.size_bytes if self.has_data else None

    @property
    def tags(self) -> list[str]:
        return list(self.glance.tags) if self.glance is not None else []


def visible_images(user, *, listing: bool = False, visibility: str | None = None):
    """The Corral images ``user`` may see (``hosts.image_access``; ``listing``: those a list
    shows by default, or of one ``visibility``), with their Glance rows, and the disk images of
    the templates of pools they may take VMs from (what ``server create`` names to be handed a
    pool's VM)."""
    if listing:
        seen = image_access.listed(user, visibility=visibility)
    else:
        seen = image_access.visible(user)
    pooled = Image.objects.filter(pk__in=pool_templates(user).values("disk_image"))
    if visibility not in (None, "all"):
        pooled = pooled.filter(visibility=visibility)
    either = Q(pk__in=seen.values("pk")) | Q(pk__in=pooled.values("pk"))
    return Image.objects.filter(either).select_related("glance")


def visible_queued(user):
    """The queued Glance images ``user`` may see: their own (every one, for a superuser)."""
    queued = GlanceImage.objects.filter(image__isnull=True)
    return queued if user.is_superuser else queued.filter(owner=user)


def visible_entries(user, *, visibility: str | None = None) -> list[Entry]:
    """The entries of Glance's list: what ``user`` is shown by default, or of one
    ``visibility`` (community images are listed only when asked for, as Glance's)."""
    images = visible_images(user, listing=True, visibility=visibility)
    entries = [Entry(image, getattr(image, "glance", None)) for image in images]
    entries += [Entry(None, glance) for glance in visible_queued(user)]
    return entries


def _as_uuid(ref: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(ref))
    except ValueError:
        raise ImageNotFound(f"No image with ID {ref}.") from None


def find_entry(user, image_id: str) -> Entry:
    """The image (active or queued) of that id if ``user`` may see it, else ImageNotFound."""
    key = _as_uuid(image_id)
    image = visible_images(user).filter(uuid=key).first()
    if image is not None:
        return Entry(image, getattr(image, "glance", None))
    glance = visible_queued(user).filter(id=key).first()
    if glance is not None:
        return Entry(None, glance)
    raise ImageNotFound(f"No image with ID {image_id}.")


def find_image(user, ref: str) -> Image:
    """The Corral image a Glance id (or a URL ending in one, as Nova's imageRef may be) names,
    if ``user`` may see it. Raises ImageNotFound, or ImageNotActive for a queued image."""
    entry = find_entry(user, str(ref).rstrip("/").rsplit("/", 1)[-1])
    if entry.image is None:
        raise ImageNotActive(f"Image {entry.id} is not active: its data was never uploaded.")
    if not entry.has_data:
        raise ImageNotActive(f"Image {entry.id} is not active: it is still being saved.")
    return entry.image
