"""What happens to leases when a reservable host changes: a host that stops answering, goes
into maintenance, leaves the free pool or is deleted gives up its leases' capacity, which is
planned again elsewhere (leases/repair.py); a host that returns or joins the pool, and a VM
that stops, may make degraded leases whole again.

Receivers of hosts' signals (``host_unreachable``, ``host_withdrawn``, ``host_returned``,
``vm_stopped``), of Django's ``pre_save``/``post_save``/``pre_delete`` of hosts (so the API, the
admin console and Blazar's os-hosts are all covered), and the host rule that refuses taking a
host out of the pool while VMs of leases run on it. Connected in ``LeasesConfig.ready()``.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import transaction

from hosts.models import Host, HostStatus
from leases.capacity import lock_reservable_hosts
from leases.free_pool import running_lease_vms
from leases.repair import LOST, make_whole_quietly, withdraw_host

logger = logging.getLogger(__name__)


def on_host_unreachable(sender, host, **kwargs) -> None:
    """``host_unreachable`` (after the sync's commit): the host's leases' capacity moves, or
    stays parked there for its return (never fatal to the sync that noticed)."""
    status = Host.objects.filter(pk=host.pk).values_list("status", flat=True).first()
    try:
        withdraw_host(host.pk, LOST.get(status, "is not responding"), leaves_pool=False)
    except Exception:
        logger.exception("moving lease capacity off host %s failed", host.pk)


def on_host_withdrawn(sender, host, reason: str, **kwargs) -> None:
    """``host_withdrawn`` (inside the operation's transaction, before the host is changed):
    move its leases' capacity first, so its VMs migrate to where their capacity now is. A
    failure leaves the operation whole (a savepoint) and the periodic repair finishes it."""
    why = LOST[HostStatus.MAINTENANCE] if reason == "maintenance" else f"is withdrawn ({reason})"
    try:
        with transaction.atomic():
            withdraw_host(host.pk, why, leaves_pool=False)
    except Exception:
        logger.exception("moving lease capacity off host %s failed", host.pk)


def on_host_returned(sender, host, **kwargs) -> None:
    if host.reservable:
        make_whole_quietly()


def on_vm_stopped(sender, vm_id: int, **kwargs) -> None:
    """A VM that stopped gave its capacity back (it may have run outside the leases)."""
    make_whole_quietly()


def check_host(host: Host) -> None:
    """Host rule: a host running VMs of live leases stays reservable."""
    if host.pk is None or host.reservable:
        return
    if not Host.objects.filter(pk=host.pk, reservable=True).exists():
        return
    running = running_lease_vms(host)
    if running:
        more = ", …" if len(running) > 5 else ""
        raise ValidationError(
            {
                "reservable": f"Host {host.name} runs VMs of leases ({', '.join(running[:5])}"
                f"{more}); it stays reservable until they stop or move."
            }
        )


def before_host_saved(sender, instance: Host, raw=False, update_fields=None, **kwargs) -> None:
    """Note whether the save takes the host out of the pool (or into it); leaving it, lock
    the reservable hosts before the host's own row, as every lease planner does."""
    if raw or instance._state.adding:
        return
    if update_fields is not None and "reservable" not in update_fields:
        return
    was = Host.objects.filter(pk=instance.pk).values_list("reservable", flat=True).first()
    instance._reservable_before = was
    if was and not instance.reservable and transaction.get_connection().in_atomic_block:
        lock_reservable_hosts()


def after_host_saved(sender, instance: Host, created=False, raw=False, **kwargs) -> None:
    if raw:
        return
    was = instance.__dict__.pop("_reservable_before", None)
    if instance.reservable and (created or was is False):
        transaction.on_commit(make_whole_quietly)
    elif was and not instance.reservable:
        withdraw_host(instance.pk, "is no longer reservable", leaves_pool=True)


def before_host_deleted(sender, instance: Host, **kwargs) -> None:
    """The host's leases' capacity moves before the host goes (or is left unplaced)."""
    withdraw_host(instance.pk, "was deleted", leaves_pool=True)
