"""Quotas: how much one user may hold (VMs, vCPUs, memory, disk, images and their size,
snapshots) and
how much their leases may reserve at once, set per user, per group and for everyone;
``hosts.quotas`` reads and enforces them."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce

# What a limit set to this means: no limit at all (an empty limit is "not set here").
UNLIMITED = -1

# The limited resources: (field, how people call it, its unit in messages).
RESOURCES = (
    ("vms", "VMs", ""),
    ("vcpus", "vCPUs", ""),
    ("memory_mb", "memory", " MB"),
    ("disk_gb", "disk", " GB"),
    ("images", "images", ""),
    ("image_gb", "image storage", " GB"),
    ("snapshots", "snapshots", ""),
)
RESOURCE_NAMES = tuple(field for field, _, _ in RESOURCES)

# What a user's leases may reserve at once (checked by the leases app over a lease's window,
# not against what the user holds): (field, the settings' name, how people call it).
LEASE_RESOURCES = (
    ("lease_instances", "LEASE_QUOTA_INSTANCES", "instances"),
    ("lease_vcpus", "LEASE_QUOTA_VCPUS", "vcpus"),
    ("lease_memory_mb", "LEASE_QUOTA_MEMORY_MB", "memory mb"),
)
LEASE_RESOURCE_NAMES = tuple(field for field, _, _ in LEASE_RESOURCES)
LIMIT_NAMES = RESOURCE_NAMES + LEASE_RESOURCE_NAMES

LIMIT_HELP = "Empty: not set here (the others that apply decide); -1: unlimited."


def _limit(verbose_name: str) -> models.IntegerField:
    return models.IntegerField(
        verbose_name,
        null=True,
        blank=True,
        validators=[MinValueValidator(UNLIMITED)],
        help_text=LIMIT_HELP,
    )


class Quota(models.Model):
    """Limits on what one user holds at once and on what their leases reserve at once: the
    user's own row, a group's row (for each of its members) or the default row (neither user
    nor group: everyone). A user's effective limit on a resource is the most generous of the
    rows that apply to them and the default (the ``CORRAL_QUOTA_*`` and ``LEASE_QUOTA_*``
    settings where no default row sets it); superusers have none."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="quota",
    )
    group = models.OneToOneField(
        Group, on_delete=models.CASCADE, null=True, blank=True, related_name="quota"
    )
    vms = _limit("VMs")
    vcpus = _limit("vCPUs")
    memory_mb = _limit("memory (MB)")
    disk_gb = _limit("disk (GB)")
    images = _limit("images")
    image_gb = _limit("image storage (GB)")
    snapshots = _limit("snapshots")
    lease_instances = _limit("instances in leases at once")
    lease_vcpus = _limit("vCPUs in leases at once")
    lease_memory_mb = _limit("memory in leases at once (MB)")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True) | Q(group__isnull=True),
                name="quota_for_a_user_or_a_group",
            ),
            # One default row: neither a user nor a group.
            models.UniqueConstraint(
                Coalesce("user", Value(0)),
                Coalesce("group", Value(0)),
                name="quota_one_row_per_holder",
                violation_error_message="There is a quota for this already.",
            ),
        ]

    def __str__(self) -> str:
        if self.user_id:
            return f"Quota of user {self.user}"
        if self.group_id:
            return f"Quota of group {self.group}"
        return "Default quota"

    @property
    def applies_to(self) -> str:
        if self.user_id:
            return "user"
        return "group" if self.group_id else "everyone"
