"""What deleting a user does to what they made in the inventory: their templates first (those
nothing uses go), then their images (those nothing uses then go); what is in use passes to the
admins. Said on the admin's delete confirmation, done on the user's ``pre_delete``."""

from __future__ import annotations

from hosts import image_access, template_access


def notes(user) -> list[str]:
    """What deleting ``user`` does to their templates and images, in words for the admin."""
    going = template_access.unused_of(user)
    return [
        *template_access.user_deletion_notes(user),
        *image_access.user_deletion_notes(user, templates_going=going),
    ]


def release(user) -> None:
    """Before ``user`` is deleted: their templates, then their images (an image only their
    unused templates booted goes with them)."""
    template_access.release_templates_of(user)
    image_access.release_images_of(user)
