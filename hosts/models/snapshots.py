"""Snapshots of a VM that its user takes, reverts to and deletes: kept by libvirt inside the
VM's disk on its host (internal qcow2 snapshots), one row each here."""

from django.conf import settings
from django.db import models

from project.names import validate_object_name


class SnapshotStatus(models.TextChoices):
    TAKING = "taking", "Being taken"
    READY = "ready", "Ready"
    DELETING = "deleting", "Being deleted"


class VmSnapshot(models.Model):
    """One snapshot of a VM: its disk, and with ``memory`` its memory and running state too
    (the VM resumes where it was on a revert). ``current`` marks the one the VM was last
    snapshotted at or reverted to. ``owner`` is who took it, whose quota it counts against:
    ``disk_gb``, what it may come to hold (the VM's disk, and its memory when saved with
    it)."""

    vm = models.ForeignKey(
        "hosts.VirtualMachine", on_delete=models.CASCADE, related_name="snapshots"
    )
    name = models.CharField(max_length=64, validators=[validate_object_name])
    description = models.TextField(blank=True, max_length=2000)
    memory = models.BooleanField(
        default=False, help_text="Saved with the VM's memory and running state."
    )
    status = models.CharField(
        max_length=16, choices=SnapshotStatus.choices, default=SnapshotStatus.TAKING
    )
    current = models.BooleanField(default=False)
    size_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="What taking it added to the VM's disk on its host."
    )
    disk_gb = models.PositiveIntegerField(default=0)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="vm_snapshots",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "VM snapshot"
        ordering = ["vm", "created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["vm", "name"],
                name="one_snapshot_name_per_vm",
                violation_error_message="The VM has a snapshot of that name already.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} of {self.vm}"

    @property
    def libvirt_name(self) -> str:
        """Its name on the host: Corral's own, never a user's words."""
        return f"corral-snapshot-{self.pk}"


def why_it_stays(vm, where: str = "its host") -> str:
    """Why ``vm`` does not move ("" when nothing holds it): its snapshots, kept in its disk on
    its host (``where``), which libvirt does not move. One query."""
    count = VmSnapshot.objects.filter(vm=vm).count()
    if not count:
        return ""
    return (
        f"VM {vm.name} has {count} snapshot{'s' if count != 1 else ''}, kept in its disk on "
        f"{where}; a VM with snapshots does not move. Delete them to migrate it."
    )
