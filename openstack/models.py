"""What OpenStack's APIs know beyond Corral's own models."""

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
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
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
