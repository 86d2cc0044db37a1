"""Power-state sync (CloudStack's design): hosts report raw power states; the DB follows.

``sync_host`` reads one host's report (one libvirt call) and writes only what changed: a
repeated identical report is written at most three times in a row (``power_state_update_count``)
and then not at all. When no job runs on a VM, its lifecycle status follows the host and a
change nobody asked for raises an alert; when a job runs, the job decides. A VM missing from
its host's report for two sync intervals is PowerReportMissing. A report read before a job on
a VM ended is not applied to that VM: the next one is. An unreachable host goes
NonResponsive and its VMs Unknown — never Down, never restarted because of it; one NonResponsive
past ``CORRAL_HOST_DOWN_GRACE`` is fenced by the ``host-fence`` hooks, if any (``fencing``). A
host that answers but does not let Corral in (its login refused, its SSH host key changed or
unknown, its libvirt refusing the connection or the report) is Error, never fenced: an admin's
to fix. So is a host whose URI the allowlist refuses (a row written around validation). An
Error host's VMs are left as they were: nothing is known of them. ``status_reason`` names
which of these a host is in, ``status_detail`` says it with the host's own words. Each report
also starts or stops the host's over-utilization clock (``overloaded_since``), and every so
often checks which hosts share its storage pool's folder (``shared_storage``).

A change is blamed on someone (an alert, a pool taking its VM back) only when Corral watched it:
VMs that ran on a host out of sight (not Up, or not synced for ``CORRAL_HOST_UNSEEN_AFTER``) and
that its next report shows off or gone stopped with the host (``unseen``).

``report`` applies a host's report, ``failures`` marks a host that cannot be asked,
``reconcile`` maps power states to statuses and asks a host about one VM after a job,
``shard`` shares the hosts out among task clusters (leases on hosts, with heartbeats), ``loop``
is each task cluster's syncer, which syncs the hosts it holds.
"""

from __future__ import annotations

from django.utils import timezone

from hosts import driver, sshtrust, vm_samples
from hosts.models import Host, HostStatus, HostStatusReason
from hosts.sync import shared_storage
from hosts.sync.failures import mark_refused, mark_unreachable
from hosts.sync.fencing import fence_if_due
from hosts.sync.reconcile import reconcile_vm, status_for, vm_changed
from hosts.sync.report import REPEAT_WRITE_CAP, SyncResult, apply_report, not_held

__all__ = [
    "REPEAT_WRITE_CAP",
    "SyncResult",
    "apply_report",
    "mark_refused",
    "mark_unreachable",
    "reconcile_vm",
    "status_for",
    "sync_host",
    "vm_changed",
]


def sync_host(host_id: int, owner: str | None = None) -> SyncResult:
    """Read one host's report and bring the DB in step with it.

    With ``owner`` (a task cluster syncing its share, ``hosts.sync.shard``), nothing is read
    or written unless that task cluster holds the host; it is checked again, under the host
    row's lock, before anything is written.
    """
    host = Host.objects.get(pk=host_id)
    if host.status == HostStatus.MAINTENANCE:
        return SyncResult(host_status=host.status)
    if not_held(host, owner):
        return SyncResult(host_status=host.status, skipped=True)
    untrusted = sshtrust.refusal(host)
    if untrusted:
        reason = HostStatusReason.HOST_KEY_UNKNOWN
        return mark_refused(host_id, untrusted, owner, reason=reason)
    try:
        # Every so often, which hosts share its pool's folder (hosts.sync.shared_storage).
        now = timezone.now()
        marker = str(host.storage_marker) if shared_storage.check_due(host, now) else ""
        # Once a minute, its running VMs' counters too, for their charts.
        report = driver.host_report(
            host.uri,
            host.storage_pool,
            host.storage_path,
            marker,
            usage=vm_samples.due(host.pk, now),
        )
    except driver.UriRefused as exc:
        return mark_refused(host_id, exc.message, owner)
    except driver.HostUnreachable as exc:
        changed = sshtrust.changed_key(host, exc.for_admins)
        if changed:
            reason = HostStatusReason.HOST_KEY_CHANGED
            return mark_refused(host_id, changed, owner, reason=reason)
        # The host's status and alert are for its admins: with the host's own words.
        if exc.reason != driver.HostProblem.UNREACHABLE:
            # It answered and would not let Corral in: an admin's to fix, not a lost host.
            return mark_refused(host_id, exc.for_admins, owner, reason=exc.reason)
        result = mark_unreachable(host_id, exc.for_admins, owner)
        if result.host_status == HostStatus.NON_RESPONSIVE and not result.skipped:
            fence_if_due(host_id, result, owner)  # after the commit: no lock held while hooks run
        return result
    except driver.DriverError as exc:
        # The host answers, and its libvirt refused or failed the report itself.
        reason = HostStatusReason.LIBVIRT_REFUSED
        return mark_refused(host_id, exc.for_admins, owner, reason=reason)
    return apply_report(host_id, report, owner, host=host)
