"""What OpenStack's APIs keep beside Corral's own objects: the Nova side of affinity groups."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
