"""What reaches a guest beyond its power state: the tail of its serial console, and the
one-time tickets that open its screen (VNC) in a browser."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from hosts.models.inventory import VirtualMachine


class ConsoleLog(models.Model):
    """The last 64 KiB of a VM's serial console, copied from its host by the guest-info loop
    (requests read this row, never the host). ``size`` is the log's size on the host then."""

    vm = models.OneToOneField(VirtualMachine, on_delete=models.CASCADE, related_name="console_log")
    text = models.TextField(blank=True)
    size = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        default_permissions = ()

    def __str__(self) -> str:
        return f"console of {self.vm_id} ({self.size} bytes)"


class ConsoleKind(models.TextChoices):
    SCREEN = "vnc", "Screen (VNC)"
    SERIAL = "serial", "Serial terminal"


class ConsoleTicket(models.Model):
    """A one-time right for ``user`` to open ``vm``'s screen or serial terminal (``kind``)
    until ``expires_at``. Only the ticket's SHA-256 is kept; ``used_at`` is set when it is
    redeemed (at most once)."""

    digest = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=8, choices=ConsoleKind.choices, default=ConsoleKind.SCREEN)
    vm = models.ForeignKey(VirtualMachine, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        default_permissions = ()

    def __str__(self) -> str:
        return f"console ticket of {self.user_id} for VM {self.vm_id}"
