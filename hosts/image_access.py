"""Who sees, lists, uploads and manages an image: its owner and visibility, as Glance has them.

- **private**: its owner; **shared**: its owner and its members (users, or groups and their
  users) who were offered it, listed for them once they accept; **public**: everyone who may see
  images where it is offered (``hosts.view_image``); **community**: the same, but listed by
  default only for its owner (Glance's ``visibility=community`` filter lists them).
- Admins of an image's scope (``hosts.change_image`` there: ClusterAdmin, the System's admins)
  see and manage every image of it; an image without an owner is theirs (images made before
  images had owners are public; those of a deleted user that were in use are private).
- Whoever may create VMs (``hosts.add_virtualmachine`` in a cluster or system-wide) uploads
  images of their own, private by default; only admins make an image public (or take it back).

Every read of images goes through ``visible`` or ``listed``: what they leave out does not exist
for the caller (404 in the API, Glance and Nova, a field error in template forms).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from hosts import images
from hosts.error_codes import HostErrorCode
from hosts.models import (
    Cluster,
    Image,
    ImageMember,
    ImageVisibility,
    MemberStatus,
    Template,
    VirtualMachine,
)
from project.access.permissions import grant_condition, holds, holds_at_system, is_unprivileged
from project.errors import Refused

OPEN = (ImageVisibility.PUBLIC, ImageVisibility.COMMUNITY)


def _memberships(user) -> QuerySet:
    return ImageMember.objects.filter(image=OuterRef("pk")).filter(
        Q(user=user) | Q(group__in=user.groups.all())
    )


def _admin_condition(user) -> Q:
    return grant_condition(Image, user, "hosts.change_image")


def visible(user, queryset: QuerySet | None = None) -> QuerySet:
    """The images ``user`` may see and use (boot, make templates from, read the data of)."""
    queryset = Image.objects.all() if queryset is None else queryset
    if is_unprivileged(user):
        return queryset.none()
    if user.is_superuser:
        return queryset
    return queryset.filter(
        _admin_condition(user)
        | Q(owner=user)
        | (Q(visibility__in=OPEN) & grant_condition(Image, user, "hosts.view_image"))
        | (Q(visibility=ImageVisibility.SHARED) & Exists(_memberships(user)))
    )


def listed(user, queryset: QuerySet | None = None, *, visibility: str | None = None) -> QuerySet:
    """The images a list shows ``user`` by default: the visible ones except community images of
    others and shared ones offered to them that they have not accepted (Glance's defaults);
    ``visibility`` asks for one visibility only (community images are listed when asked for),
    ``"all"`` for every visible image."""
    images = visible(user, queryset)
    if visibility == "all":
        return images
    if visibility is not None:
        return images.filter(visibility=visibility)
    if user.is_superuser:
        return images
    own = Q(owner=user) | _admin_condition(user)
    accepted = Exists(_memberships(user).filter(status=MemberStatus.ACCEPTED))
    return images.filter(
        own
        | Q(visibility=ImageVisibility.PUBLIC)
        | (Q(visibility=ImageVisibility.SHARED) & accepted)
    )


def administers(user, image: Image) -> bool:
    """Whether ``user`` is an admin of the image's scope (publishes, manages any image there)."""
    return holds(user, "hosts.change_image", image)


def manages(user, image: Image, verb: str = "change") -> bool:
    """Whether ``user`` may change (rename, share) or delete (``verb``) ``image``: its owner, or
    whoever holds the action on it."""
    if image.owner_id is not None and image.owner_id == user.pk and user.is_active:
        return True
    return holds(user, f"hosts.{verb}_image", image)


def may_create_vms(user, cluster: Cluster | None = None) -> bool:
    """Whether ``user`` may create VMs in ``cluster`` (none: in some cluster, or system-wide)."""
    if is_unprivileged(user):
        return False
    if cluster is not None:
        return holds(user, "hosts.add_virtualmachine", VirtualMachine(cluster=cluster))
    if user.is_superuser:
        return True
    return Cluster.objects.filter(
        grant_condition(Cluster, user, "hosts.add_virtualmachine")
    ).exists() or holds_at_system(user, "hosts.add_virtualmachine")


def may_upload(user, cluster: Cluster | None = None) -> bool:
    """Whether ``user`` may upload an image offered in ``cluster`` (none: every cluster): an
    admin there, or anyone who may create VMs there (or, for every cluster, somewhere)."""
    return holds(user, "hosts.add_image", Image(cluster=cluster)) or may_create_vms(user, cluster)


def default_visibility(user, cluster: Cluster | None = None) -> str:
    """An upload's visibility unless asked: public for the admins who may upload there (as
    every image was before images had owners), private for everyone else."""
    if holds(user, "hosts.add_image", Image(cluster=cluster)):
        return ImageVisibility.PUBLIC
    return ImageVisibility.PRIVATE


def check_visibility(user, image: Image, visibility: str) -> None:
    """Refuse a visibility ``user`` may not give ``image`` (public, or taking it back, is the
    admins'). ``image`` may be unsaved (an upload)."""
    publishing = ImageVisibility.PUBLIC in (visibility, image.visibility)
    if publishing and visibility != image.visibility and not administers(user, image):
        raise Refused(
            HostErrorCode.IMAGE_PUBLISH_REFUSED,
            "Only admins make an image public or take it back.",
            field="visibility",
        )


def set_visibility(user, image: Image, visibility: str) -> Image:
    """Give ``image`` another visibility (its members are kept: they see it while it is
    shared)."""
    if visibility not in ImageVisibility.values:
        raise Refused(
            HostErrorCode.IMAGE_PUBLISH_REFUSED,
            f"Visibility is one of {', '.join(ImageVisibility.values)}.",
            field="visibility",
        )
    check_visibility(user, image, visibility)
    if visibility != image.visibility:
        image.visibility = visibility
        image.save(update_fields=["visibility", "updated_at"])
    return image


def add_member(image: Image, *, user=None, group=None) -> ImageMember:
    """Offer a shared image to a user or a group (pending until they accept)."""
    if image.visibility != ImageVisibility.SHARED:
        raise Refused(HostErrorCode.IMAGE_NOT_SHARED, "Only a shared image has members.")
    if user is None and group is None:
        raise Refused(HostErrorCode.IMAGE_MEMBER_UNKNOWN, "Name a user or a group.")
    with transaction.atomic():
        if ImageMember.objects.filter(image=image, user=user, group=group).exists():
            raise Refused(
                HostErrorCode.IMAGE_MEMBER_EXISTS, "The image is offered to that member already."
            )
        return ImageMember.objects.create(image=image, user=user, group=group)


def is_member(user, member: ImageMember) -> bool:
    """Whether ``user`` answers for ``member``: the user, or a user of the group."""
    if member.user_id is not None:
        return member.user_id == user.pk
    return user.groups.filter(pk=member.group_id).exists()


def set_member_status(member: ImageMember, status: str) -> ImageMember:
    """A member's answer: accepted (listed for them), rejected or pending again."""
    if status not in MemberStatus.values:
        raise Refused(
            HostErrorCode.IMAGE_MEMBER_UNKNOWN,
            f"Status is one of {', '.join(MemberStatus.values)}.",
            field="status",
        )
    member.status = status
    member.save(update_fields=["status", "updated_at"])
    return member


def in_use(image: Image, *, templates_going=()) -> bool:
    """Whether a template (but those of ``templates_going``) or a VM boots from ``image``."""
    templates = Template.objects.filter(
        Q(disk_image=image) | Q(kernel_image=image) | Q(initrd_image=image)
    ).exclude(pk__in=[template.pk for template in templates_going])
    return templates.exists() or VirtualMachine.objects.filter(disk_image=image).exists()


def user_deletion_notes(user, *, templates_going=()) -> list[str]:
    """What deleting ``user`` does to their images, for the admin's confirmation
    (``templates_going``: the templates deleted with them, which no longer count as using
    an image)."""
    owned = list(Image.objects.filter(owner=user).order_by("name"))
    if not owned:
        return []
    kept = [image.name for image in owned if in_use(image, templates_going=templates_going)]
    dropped = [image.name for image in owned if image.name not in kept]
    notes = []
    if dropped:
        notes.append(f"Their images no template or VM uses are deleted: {', '.join(dropped)}.")
    if kept:
        notes.append(
            "Their images in use are kept, handed to the admins (no owner, private): "
            f"{', '.join(kept)}."
        )
    return notes


def release_images_of(user, *, requested_by=None) -> None:
    """Before ``user`` is deleted, once their templates are released
    (``hosts.user_deletion``): delete their images nothing uses; hand the admins those in use
    (no owner, private: their VMs and templates go on booting from them, no one else sees
    them)."""
    for image in Image.objects.filter(owner=user):
        if in_use(image):
            Image.objects.filter(pk=image.pk).update(owner=None, visibility=ImageVisibility.PRIVATE)
            ImageMember.objects.filter(image=image).delete()
        else:
            images.delete_image(image, requested_by=requested_by)
