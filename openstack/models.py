"""What OpenStack's APIs keep beside the apps below: Nova's side of servers and server
groups, Glance's side of images."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Server(models.Model):
    """A server made through Nova's API: the name, metadata and choices its creator gave, which
    Corral's VM does not hold (Nova's names are free text and may repeat; a VM's are not).

    ``id`` is the server's id: its VM's UUID. A server that never became a VM (Corral refused
    it, as Nova's scheduler refuses one: no capacity, a reservation full) keeps no VM and a
    fault, and is ERROR until deleted. A VM without a server row (made through Corral's API or
    portal) is a server too, named after the VM.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    vm = models.OneToOneField(
        "hosts.VirtualMachine",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="server",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Its VM's holder when the row was made (a row speaks for the VM while that "
        "user holds it); who asked for a server that never became a VM.",
    )
    name = models.CharField(max_length=255)
    description = models.CharField(max_length=255, blank=True, null=True)
    flavor_id = models.CharField(max_length=255)
    image_id = models.CharField(max_length=255, blank=True)
    key_name = models.CharField(max_length=255, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    availability_zone = models.CharField(max_length=255, blank=True)
    config_drive = models.BooleanField(default=False)
    reservation_id = models.CharField(max_length=32, blank=True)
    launch_index = models.PositiveIntegerField(default=0)
    from_pool = models.BooleanField(default=False)
    fault_code = models.PositiveIntegerField(null=True, blank=True)
    fault_message = models.TextField(blank=True)
    fault_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class GlanceImage(models.Model):
    """An image made through Glance's API: what Glance says of it and Corral's image does not
    hold (its free-text name, formats as given, properties, tags, owner).

    Queued while ``image`` is empty (created, no data uploaded yet; only its owner sees it);
    the upload makes the Corral image, with this row's id as its ``uuid``, and links it here.
    Deleting the Corral image deletes this row with it.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    image = models.OneToOneField(
        "hosts.Image",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="glance",
    )
    name = models.CharField(max_length=255, null=True, blank=True)
    disk_format = models.CharField(max_length=16, null=True, blank=True)
    container_format = models.CharField(max_length=16, null=True, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="glance_images",
        help_text="Glance's owner (the user's project); a queued image is theirs alone.",
    )
    visibility = models.CharField(
        max_length=10,
        blank=True,
        help_text="The visibility asked for at create, given to the Corral image its upload "
        "makes (empty: the uploader's default, hosts.image_access.default_visibility).",
    )
    min_disk = models.PositiveIntegerField(default=0, help_text="GiB")
    min_ram = models.PositiveIntegerField(default=0, help_text="MiB")
    properties = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return self.name or str(self.id)


class NovaServerGroup(models.Model):
    """An affinity group made through Nova's API (``os-server-groups``): the name given there
    (Nova's names may repeat and hold any printable character; the group's own name is a valid,
    unique one derived from it) and the user who made it (the group's Nova user and project)."""

    affinity_group = models.OneToOneField(
        "scheduling.AffinityGroup",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="nova_server_group",
    )
    name = models.CharField(max_length=255)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        default_permissions = ()

    def __str__(self) -> str:
        return self.name
