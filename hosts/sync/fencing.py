"""Fencing a lost host through hooks (oVirt's power management): once a host has not answered
for ``CORRAL_HOST_DOWN_GRACE`` and its VMs would restart elsewhere, the executables in
``CORRAL_HOOKS_DIR/host-fence/`` run, once per outage; all exiting 0 confirm it down
(``host_fenced``, answered by ``services.confirm_fenced`` as an admin's confirmation is).
Otherwise an alert, and an admin confirms it down."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from hosts import hooks
from hosts.models import Host, HostStatus, VirtualMachine
from hosts.signals import host_fenced
from hosts.sync.report import SyncResult
from project import events

FENCE_EVENT = "host-fence"


def fence_if_due(host_id: int, result: SyncResult, owner: str | None = None) -> None:
    """Run the host-fence hooks for a host NonResponsive past the grace, at most once per
    outage (claimed by one conditional UPDATE, so two syncs never both run them; with
    ``owner``, only by the task cluster that holds the host), with no row lock held while they
    run. Alerts go to ``result.alerts`` too."""
    fence_hooks = hooks.hooks_for(FENCE_EVENT)
    if not fence_hooks:
        return
    now = timezone.now()
    lost_before = now - timedelta(seconds=settings.CORRAL_HOST_DOWN_GRACE)
    restarts = Q(cluster__restart_elsewhere=True) | Q(
        pk__in=VirtualMachine.objects.filter(host_id=host_id, highly_available=True).values(
            "host_id"
        )
    )
    lost = Host.objects.filter(sync_owner=owner) if owner else Host.objects.all()
    claimed = (
        lost.filter(
            restarts,
            pk=host_id,
            status=HostStatus.NON_RESPONSIVE,
            non_responsive_since__lte=lost_before,
            confirmed_down_at__isnull=True,
            fence_tried_at__isnull=True,
        ).update(fence_tried_at=now, updated_at=now)
        == 1
    )
    if not claimed:
        return
    host = Host.objects.get(pk=host_id)
    environment = {
        "CORRAL_HOST_ID": str(host.pk),
        "CORRAL_HOST_NAME": host.name,
        "CORRAL_HOST_URI": host.uri,
    }
    for hook in fence_hooks:
        name = f"{FENCE_EVENT}/{hook.name}"
        try:
            returncode, output = hooks.run_hook(FENCE_EVENT, hook, [], environment)
        except hooks.HookFailed as exc:
            failure = exc.message.rstrip(".")
        except OSError as exc:  # not runnable (a wrong interpreter line, say): not fenced either
            failure = f"Hook {name} could not run: {exc}"
        else:
            if returncode == 0:
                continue
            failure = f"Hook {name} exited {returncode}: {output or 'no output'}"
        message = (
            f"Host {host.name} was not fenced: {failure}. It is not confirmed down; an admin "
            "may confirm it down once it is off."
        )
        result.alerts.append(message)
        events.alert("host", host.pk, message, cluster_id=host.cluster_id)
        return
    names = ", ".join(f"{FENCE_EVENT}/{hook.name}" for hook in fence_hooks)
    host_fenced.send(sender=Host, host=host, fenced_by=f"hook {names}")
