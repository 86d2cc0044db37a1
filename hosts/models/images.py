"""Images (disks, kernels, initrds) uploaded to Corral, and their copies on hosts."""

import uuid

from django.conf import settings
from django.db import models

from project.names import validate_object_name


class ImageKind(models.TextChoices):
    DISK = "disk", "Disk"
    KERNEL = "kernel", "Kernel"
    INITRD = "initrd", "Initrd"


class ImageFormat(models.TextChoices):
    QCOW2 = "qcow2", "qcow2"
    RAW = "raw", "raw"


class ImageStatus(models.TextChoices):
    """Whether an image can be used: ``saving`` while its job makes it from a VM's disk (it has
    no file yet: nothing boots from it), ``ready`` once its file is in the image store."""

    SAVING = "saving", "Saving"
    READY = "ready", "Ready"


class ImageVisibility(models.TextChoices):
    """Who sees an image, as Glance says it (``hosts.image_access`` applies it)."""

    PRIVATE = "private", "Private (its owner)"
    SHARED = "shared", "Shared (its owner and the members who accept it)"
    PUBLIC = "public", "Public (everyone who may see images; admins publish)"
    COMMUNITY = "community", "Community (anyone may use it; not listed by default)"


class Image(models.Model):
    """A file VMs boot from, kept in Corral's image store (``CORRAL_IMAGE_STORE``).

    Hosts receive a copy in their storage pool the first time a VM needs it there
    (``ImageCopy``). Shared by all clusters unless it names one, like templates.
    """

    name = models.CharField(max_length=64, unique=True, validators=[validate_object_name])
    uuid = models.UUIDField(
        default=uuid.uuid4, unique=True, editable=False, help_text="Its id in Glance's API."
    )
    description = models.TextField(blank=True, max_length=2000)
    cluster = models.ForeignKey(
        "hosts.Cluster",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="images",
        help_text="Leave empty to offer the image in every cluster.",
    )
    kind = models.CharField(max_length=8, choices=ImageKind.choices)
    format = models.CharField(max_length=8, choices=ImageFormat.choices, editable=False)
    size_bytes = models.PositiveBigIntegerField(editable=False)
    virtual_size_bytes = models.PositiveBigIntegerField(
        editable=False, help_text="The size of the disk the image holds (its file size if raw)."
    )
    sha256 = models.CharField(max_length=64, editable=False)
    # Glance's checksum and secure hash; empty for images stored before they were kept
    # (hosts.images.ensure_digests fills them from the file).
    md5 = models.CharField(max_length=32, blank=True, editable=False)
    sha512 = models.CharField(max_length=128, blank=True, editable=False)
    status = models.CharField(
        max_length=12, choices=ImageStatus.choices, default=ImageStatus.READY, editable=False
    )
    file = models.CharField(max_length=200, editable=False, help_text="In the image store.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="images",
        help_text="Who uploaded it and manages it; none: the admins' (images made before "
        "images had owners, or whose owner was deleted).",
    )
    visibility = models.CharField(
        max_length=10,
        choices=ImageVisibility.choices,
        default=ImageVisibility.PUBLIC,
        editable=False,
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    grant_scopes = {"cluster": "cluster_id"}
    grant_shared_scopes = {"cluster"}
    grant_shared_actions = {"hosts.view_image"}

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def volume_name(self) -> str:
        """The image's volume in a host's storage pool (named by content, so a changed file
        is never mistaken for an old copy)."""
        return f"corral-image-{self.pk}-{self.sha256[:12]}.{self.format}"


class MemberStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"


class ImageMember(models.Model):
    """A user or a group a shared image is offered to (Glance's image member): they see it
    once the image is shared, and it is listed for them once they accept it."""

    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="image_memberships",
    )
    group = models.ForeignKey(
        "auth.Group",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="image_memberships",
    )
    status = models.CharField(
        max_length=8, choices=MemberStatus.choices, default=MemberStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["image", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="image_member_is_a_user_or_a_group",
            ),
            models.UniqueConstraint(fields=["image", "user"], name="one_membership_per_user"),
            models.UniqueConstraint(fields=["image", "group"], name="one_membership_per_group"),
        ]

    def __str__(self) -> str:
        return f"{self.image} for {self.user or self.group}"

    @property
    def member_id(self) -> str:
        """Its id in Glance's API: the user's project (the user's id), or ``g`` and a group's."""
        return str(self.user_id) if self.user_id is not None else f"g{self.group_id}"


class CopyState(models.TextChoices):
    COPYING = "copying", "Copying"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class ImageCopy(models.Model):
    """An image's volume in one host's storage pool: being copied, ready, or failed (why)."""

    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="copies")
    host = models.ForeignKey("hosts.Host", on_delete=models.CASCADE, related_name="image_copies")
    state = models.CharField(max_length=8, choices=CopyState.choices, default=CopyState.COPYING)
    error = models.CharField(max_length=500, blank=True)
    path = models.CharField(max_length=1000, blank=True, help_text="The volume's path there.")
    claimed_by = models.UUIDField(null=True, blank=True, help_text="The copy's claim token.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["image", "host"]
        constraints = [
            models.UniqueConstraint(fields=["image", "host"], name="one_copy_per_image_and_host")
        ]

    def __str__(self) -> str:
        return f"{self.image} on {self.host}"
