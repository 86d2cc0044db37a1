"""A host that cannot be asked: NonResponsive when it does not answer (its VMs Unknown, never
Down); Error when it answers but does not let Corral in, or its URI is one Corral never opens
(its VMs left as they were). Either way ``status_reason`` says why."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from hosts.models import (
    Host,
    HostStatus,
    HostStatusReason,
    Job,
    PowerState,
    VirtualMachine,
    VmStatus,
)
from hosts.models.jobs import RUNNING_JOB_STATES
from hosts.signals import host_unreachable
from hosts.sync.reconcile import RUNNING_STATUSES
from hosts.sync.report import SyncResult, not_held
from project import events


@transaction.atomic
def mark_refused(
    host_id: int,
    detail: str,
    owner: str | None = None,
    reason: str = HostStatusReason.URI_REFUSED,
) -> SyncResult:
    """Host Error for ``reason`` (a ``HostStatusReason``): its URI is one Corral never opens,
    or the host answered and would not let Corral in (its login refused, its SSH host key
    changed or unknown, its libvirt refusing). One alert (when it becomes so); its VMs are left
    as they are — the host was not asked, so nothing is known of them. Never fenced."""
    host = Host.objects.select_for_update(no_key=True).get(pk=host_id)
    if host.status == HostStatus.MAINTENANCE:
        return SyncResult(host_status=host.status)
    if not_held(host, owner):
        return SyncResult(host_status=host.status, skipped=True)
    result = SyncResult(host_status=HostStatus.ERROR)
    detail = detail[:500]
    now = (host.status, host.status_reason, host.status_detail)
    if now == (HostStatus.ERROR, reason, detail):
        return result
    Host.objects.filter(pk=host.pk).update(
        status=HostStatus.ERROR,
        status_reason=reason,
        status_detail=detail,
        updated_at=timezone.now(),
    )
    message = f"Host {host.name} is in error: {detail}"
    result.alerts.append(message)
    events.alert("host", host.pk, message, cluster_id=host.cluster_id)
    # Like an unreachable host, it holds no reservation any more (moved once, when it failed).
    failed = host.status in (HostStatus.ERROR, HostStatus.NON_RESPONSIVE)
    if not failed:
        transaction.on_commit(lambda: host_unreachable.send(sender=Host, host=host))
    return result


@transaction.atomic
def mark_unreachable(host_id: int, detail: str, owner: str | None = None) -> SyncResult:
    """Host NonResponsive (since when, kept); its VMs Unknown (their real state is not known,
    so never Down), each noting whether it ran: only an admin's confirmation that the host
    is down (``hosts.failover``) may restart those elsewhere."""
    host = Host.objects.select_for_update(no_key=True).get(pk=host_id)
    if host.status == HostStatus.MAINTENANCE:
        return SyncResult(host_status=host.status)
    if not_held(host, owner):
        return SyncResult(host_status=host.status, skipped=True)
    result = SyncResult(host_status=HostStatus.NON_RESPONSIVE)
    if host.status != HostStatus.NON_RESPONSIVE:
        Host.objects.filter(pk=host.pk).update(
            status=HostStatus.NON_RESPONSIVE,
            status_reason=HostStatusReason.UNREACHABLE,
            status_detail=detail[:500],
            non_responsive_since=timezone.now(),
            updated_at=timezone.now(),
        )
        message = f"Host {host.name} is not responding: {detail}"
        result.alerts.append(message)
        events.alert("host", host.pk, message, cluster_id=host.cluster_id)
        transaction.on_commit(lambda: host_unreachable.send(sender=Host, host=host))
    busy = Job.objects.filter(vm__host=host, state__in=RUNNING_JOB_STATES).values("vm_id")
    stale = VirtualMachine.objects.filter(host=host).exclude(pk__in=busy)
    stale = stale.exclude(status=VmStatus.UNKNOWN, power_state=PowerState.UNKNOWN)
    now = timezone.now()
    result.vms_written = stale.update(
        # Read before the row changes (an UPDATE's expressions see the old row): whether it
        # ran, so that it is restarted elsewhere if the host is confirmed down.
        running_when_lost=Case(
            When(status__in=RUNNING_STATUSES, then=Value(True)), default=Value(False)
        ),
        status=VmStatus.UNKNOWN,
        power_state=PowerState.UNKNOWN,
        power_state_update_count=1,
        power_state_updated_at=now,
        updated_at=now,
    )
    return result
