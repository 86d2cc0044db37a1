"""Applying one host's report: write only what changed, cap repeated identical writes, let a
running job decide its VM's status, note VMs missing from the report and the domains Corral
does not manage, and the host's own figures. A host seen again after it was out of sight has
the VMs that stopped meanwhile stopped with it (``hosts.sync.unseen``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hosts import driver, samples, vm_samples
from hosts.driver.base import scheme
from hosts.models import (
    HOLDING_STATUSES,
    ExternalDomain,
    Host,
    HostStatus,
    Job,
    PowerState,
    VirtualMachine,
    VmStatus,
)
from hosts.models.jobs import RUNNING_JOB_STATES
from hosts.signals import host_reported, host_returned
from hosts.sync import load, shared_storage, unseen
from hosts.sync.reconcile import (
    RUNNING_STATUSES,
    announce_stop,
    status_for,
    vm_changed,
    vm_scope,
)
from project import events
from project.models import EventKind

REPEAT_WRITE_CAP = 3

# libvirt's test driver (simulated hosts' URIs: test:///default, test+unix://…) starts with this
# domain of its own (its default configuration's).
TEST_DRIVER = "test"
TEST_DRIVERS_OWN_DOMAIN = ("6695eb01-f6a4-8304-79aa-97f2502e193f", "test")

ACTIVE_POWER_STATES = {
    PowerState.RUNNING,
    PowerState.BLOCKED,
    PowerState.SHUTDOWN,
    PowerState.PAUSED,
    PowerState.PMSUSPENDED,
}


@dataclass
class SyncResult:
    """What one sync of one host did: the host's status after it, VMs written, alerts raised."""

    host_status: str
    vms_written: int = 0
    alerts: list[str] = field(default_factory=list)
    skipped: bool = False  # the host is another task cluster's to sync now
    guests: int = 0  # Corral's VMs on the host: none, and its guests have nothing to show


def not_held(host: Host, owner: str | None) -> bool:
    """Whether a sync for ``owner`` (a task cluster; None: any caller) must leave the host
    alone: another task cluster holds it now (``hosts.sync.shard``)."""
    return owner is not None and host.sync_owner != owner


def _record_power(vm: VirtualMachine, state: str, host: Host, now) -> set[str]:
    """Apply one report to ``vm`` in memory; the fields to write (none for a capped repeat)."""
    if vm.power_state == state and vm.power_host_id == host.pk:
        if vm.power_state_update_count >= REPEAT_WRITE_CAP:
            return set()
        vm.power_state_update_count += 1
        vm.power_state_updated_at = now
        return {"power_state_update_count", "power_state_updated_at"}
    vm.power_state, vm.power_host = state, host
    vm.power_state_update_count, vm.power_state_updated_at = 1, now
    return {"power_state", "power_host", "power_state_update_count", "power_state_updated_at"}


def _record_cpu(vm: VirtualMachine, percent: float | None, active: bool) -> set[str]:
    """A running VM's measured load when it moved enough; none for a VM that does not run."""
    if not active:
        percent = None
    elif percent is None or not load.moved(vm.cpu_usage_percent, percent):
        return set()  # no second sample yet, or too small a change to write
    if vm.cpu_usage_percent == percent:
        return set()
    vm.cpu_usage_percent = percent
    return {"cpu_usage_percent"}


def _note_missing(vm: VirtualMachine, now) -> set[str]:
    """The first report without a VM its host reported before: remember since when.

    An update count of 0 marks "missing since ``power_state_updated_at``". The time of the
    last write would not do: repeated identical reports stop being written, so for a VM that
    ran unchanged for a while it is long past, and one missed report would count as two
    sync intervals.
    """
    vm.power_state_update_count, vm.power_state_updated_at = 0, now
    return {"power_state_update_count", "power_state_updated_at"}


def _follow_host(vm: VirtualMachine, host: Host, state: str, busy: bool) -> tuple[set[str], str]:
    """Make the DB follow the host (where the VM runs; its status when no job decides).

    Returns the fields changed and an alert message ("" for none).
    """
    changed: set[str] = set()
    alert = ""
    # A migration job moves its VM itself and records where it landed: a report from either
    # side while it runs (or read before it moved the VM) must not move it, nor raise an alert.
    migrating = busy and vm.status == VmStatus.MIGRATING
    if state in ACTIVE_POWER_STATES and vm.host_id != host.pk and not migrating:
        previous = vm.host.name if vm.host_id else "no host"
        alert = f"VM {vm.name} is running on {host.name}, not {previous}: moved outside Corral"
        vm.host = host
        # Its screen listens elsewhere there: no console leads to the old host's port until
        # the guest-info loop reads the new one.
        vm.graphics_port = None
        changed |= {"host", "graphics_port"}
    if busy:
        return changed, alert
    wanted = status_for(state)
    if wanted != vm.status:
        before = vm.status
        vm.status = wanted
        changed.add("status")
        if state == PowerState.REPORT_MISSING:
            alert = alert or f"VM {vm.name} disappeared from host {host.name}"
            vm.host = None
            changed.add("host")
        elif before in (VmStatus.UP, VmStatus.DOWN, VmStatus.PAUSED):
            verb = {VmStatus.DOWN: "stopped", VmStatus.UP: "started", VmStatus.PAUSED: "paused"}
            alert = alert or f"VM {vm.name} {verb.get(wanted, wanted)} outside Corral"
    return changed, alert


@dataclass
class _Plan:
    """What one report changes, worked out from rows read before anything is written."""

    to_write: dict[int, tuple[VirtualMachine, set[str]]] = field(default_factory=dict)
    alerts: list[tuple[VirtualMachine, str]] = field(default_factory=list)
    changed: list[VirtualMachine] = field(default_factory=list)  # status moved, no alert
    stopped: list[int] = field(default_factory=list)  # stopped while they ran
    # Stopped while Corral could not see their host (hosts.sync.unseen): with the host.
    with_host: list[VirtualMachine] = field(default_factory=list)
    external: _ExternalChanges | None = None
    host_values: dict = field(default_factory=dict)
    came_back: bool = False
    committed_vcpus: int = 0
    guests: int = 0
    figures: samples.Figures | None = None

    @property
    def writes(self) -> bool:
        return bool(self.to_write or self.external or self.host_values)


def _vms_of(host: Host, reported: dict[str, driver.DomainReport]) -> list[VirtualMachine]:
    """The VMs a report speaks of: the host's, those it runs, and those arriving on it."""
    return list(
        VirtualMachine.objects.filter(
            Q(host=host) | Q(uuid__in=list(reported)) | Q(migrating_to=host)
        ).select_related("host")
    )


def _plan(
    host: Host,
    vms: list[VirtualMachine],
    report: driver.HostReport,
    cpu: load.Load,
    now,
) -> _Plan:
    plan = _Plan()
    reported = {d.uuid: d for d in report.domains}
    # A job that ended after the host was read may have changed its VM since: the report
    # shows the VM as it was before, so that VM waits for the next report.
    jobs_since = Job.objects.filter(vm__in=vms).filter(
        Q(state__in=RUNNING_JOB_STATES) | Q(finished_at__gte=report.read_at or now)
    )
    busy, overtaken = set(), set()
    for vm_id, state in jobs_since.values_list("vm_id", "state"):
        (busy if state in RUNNING_JOB_STATES else overtaken).add(vm_id)
    grace = now - timedelta(seconds=2 * settings.CORRAL_SYNC_INTERVAL)
    back = unseen.out_of_sight(host, now)
    managed = set()
    used_memory = running = 0
    for vm in vms:
        domain = reported.get(str(vm.uuid))
        managed.add(str(vm.uuid))
        active = domain is not None and domain.power_state in ACTIVE_POWER_STATES
        if active:
            used_memory += vm.memory_mb
            running += 1
        cpu_fields = _record_cpu(vm, cpu.domain_percent.get(str(vm.uuid)), active)
        if cpu_fields:
            plan.to_write[vm.pk] = (vm, cpu_fields)
        if vm.pk in overtaken:
            continue
        if (
            domain is not None
            and vm.host_id not in (None, host.pk)
            and domain.power_state not in ACTIVE_POWER_STATES
        ):
            # A stopped copy of a VM that lives on another host (left behind on a host that
            # was confirmed down and came back, say): it says nothing of the VM.
            continue
        if domain is None:
            if vm.host_id != host.pk or vm.power_state == PowerState.REPORT_MISSING:
                continue
            if vm.power_host_id == host.pk and not back:
                if vm.power_state_update_count > 0:
                    plan.to_write[vm.pk] = (vm, _note_missing(vm, now) | cpu_fields)
                    continue
                if vm.power_state_updated_at and vm.power_state_updated_at > grace:
                    continue  # missing for under two intervals: reports can miss a domain
            state = PowerState.REPORT_MISSING
        else:
            state = domain.power_state
        status_before = vm.status
        fields = _record_power(vm, state, host, now) | cpu_fields
        if back and vm.pk not in busy and unseen.stopped_there(vm, host, state):
            plan.to_write[vm.pk] = (vm, fields | unseen.stopped_with_host(vm, state))
            plan.with_host.append(vm)
            continue
        moved, alert = _follow_host(vm, host, state, vm.pk in busy)
        fields |= moved
        if fields:
            plan.to_write[vm.pk] = (vm, fields)
        if alert:
            plan.alerts.append((vm, alert))
        elif "status" in moved:
            plan.changed.append(vm)
        if vm.status == VmStatus.DOWN and status_before in RUNNING_STATUSES:
            plan.stopped.append(vm.pk)
    holding = [
        vm
        for vm in vms
        if (vm.host_id == host.pk and vm.status in HOLDING_STATUSES)
        or vm.migrating_to_id == host.pk
    ]
    plan.committed_vcpus = sum(vm.vcpus for vm in holding)
    plan.figures = samples.Figures(
        cpu_percent=cpu.host_percent,
        memory_given_mb=sum(vm.memory_mb for vm in holding),
        memory_used_mb=used_memory,
        vms_running=running,
    )
    plan.guests = sum(vm.host_id == host.pk for vm in vms)
    unmanaged = [
        d for u, d in reported.items() if u not in managed and not _test_drivers_own(host, d)
    ]
    plan.external = _external_changes(host, unmanaged)
    plan.came_back, plan.host_values = _host_changes(
        host, report, used_memory, cpu.host_percent, now
    )
    return plan


def apply_report(
    host_id: int, report: driver.HostReport, owner: str | None = None, host: Host | None = None
) -> SyncResult:
    """Bring the DB in step with one host's report; ``host``: its row as read before the
    report, if the caller has it.

    The usual report is unchanged since the last: it is compared with the rows as they are,
    without a transaction or a lock, and writes nothing. A report that changes anything is
    worked out again and written under the host row's lock (one sync per host at a time),
    from rows read under it.
    """
    if host is None:
        host = Host.objects.get(pk=host_id)
    if host.status == HostStatus.MAINTENANCE:
        return SyncResult(host_status=host.status)
    if not_held(host, owner):
        return SyncResult(host_status=host.status, skipped=True)
    now = timezone.now()
    reported = {d.uuid: d for d in report.domains}
    vms = _vms_of(host, reported)
    cpu = load.measure(host.pk, report, {str(vm.uuid): vm.vcpus for vm in vms})
    plan = _plan(host, vms, report, cpu, now)
    vm_samples.record(host.pk, vms, report, now)
    if plan.writes:
        return _write_report(host_id, report, owner, cpu, now)
    samples.record(host.pk, plan.figures, now)
    host_reported.send(sender=Host, host=host, committed_vcpus=plan.committed_vcpus)
    return SyncResult(host_status=HostStatus.UP, guests=plan.guests)


@transaction.atomic
def _write_report(
    host_id: int, report: driver.HostReport, owner: str | None, cpu: load.Load, now
) -> SyncResult:
    """Write what a report changes, the host row locked.

    The lock is FOR NO KEY UPDATE: it keeps syncs of one host apart, yet lets a job that holds
    one of the host's VMs and points it at the host (a foreign-key check at commit) finish,
    instead of deadlocking against this sync waiting for that VM's row.
    """
    host = Host.objects.select_for_update(no_key=True).get(pk=host_id)
    if host.status == HostStatus.MAINTENANCE:
        return SyncResult(host_status=host.status)  # put in maintenance while it was read
    if not_held(host, owner):
        return SyncResult(host_status=host.status, skipped=True)  # its lease moved on
    reported = {d.uuid: d for d in report.domains}
    plan = _plan(host, _vms_of(host, reported), report, cpu, now)
    result = SyncResult(
        host_status=HostStatus.UP, vms_written=len(plan.to_write), guests=plan.guests
    )
    _write(plan.to_write)
    for vm, alert in plan.alerts:
        result.alerts.append(alert)
        events.alert("vm", vm.pk, alert, **vm_scope(vm))
    for vm in plan.changed:
        vm_changed(vm, f"VM {vm.name} is {vm.get_status_display()}")
    for vm_id in plan.stopped:
        announce_stop(vm_id)
    if plan.with_host:
        alert = unseen.alert_text(host, plan.with_host)
        result.alerts.append(alert)
        events.alert("host", host.pk, alert, cluster_id=host.cluster_id)
        for vm in plan.with_host:
            vm_changed(vm, unseen.event_text(vm, host))
            announce_stop(vm.pk, with_host=True)
    if plan.external:
        plan.external.write(host)
    _write_host(host, plan, now)
    samples.record(host.pk, plan.figures, now)
    _announce_storage(host, plan.host_values, result)
    # The host's load is known now (the balancer starts or stops its overload clock).
    host_reported.send(sender=Host, host=host, committed_vcpus=plan.committed_vcpus)
    return result


def _announce_storage(host: Host, written: dict, result: SyncResult) -> None:
    """An alert when the check of the host's pool folder found a new problem; an event when
    one is gone."""
    if "storage_problem" not in written:
        return
    found = written["storage_problem"]
    if found:
        alert = shared_storage.alert_text(host, found)
        result.alerts.append(alert)
        events.alert("host", host.pk, alert, cluster_id=host.cluster_id)
        return
    events.emit(
        EventKind.CHANGED,
        "host",
        host.pk,
        f"Host {host.name} shares storage as set",
        cluster_id=host.cluster_id,
    )


def _write(to_write: dict[int, tuple[VirtualMachine, set[str]]]) -> None:
    by_fields: dict[frozenset, list[VirtualMachine]] = {}
    for vm, fields in to_write.values():
        by_fields.setdefault(frozenset(fields | {"updated_at"}), []).append(vm)
    now = timezone.now()
    for fields, vms in by_fields.items():
        for vm in vms:
            vm.updated_at = now
        VirtualMachine.objects.bulk_update(vms, sorted(fields), batch_size=500)


@dataclass
class _ExternalChanges:
    """How the host's list of domains Corral does not manage differs from its report."""

    gone: list[int]
    new: list[driver.DomainReport]
    renamed: list[tuple[int, driver.DomainReport]]

    def __bool__(self) -> bool:
        return bool(self.gone or self.new or self.renamed)

    def write(self, host: Host) -> None:
        if self.gone:
            ExternalDomain.objects.filter(pk__in=self.gone).delete()
        for domain in self.new:
            ExternalDomain.objects.create(
                host=host, uuid=domain.uuid, name=domain.name, power_state=domain.power_state
            )
        for pk, domain in self.renamed:
            ExternalDomain.objects.filter(pk=pk).update(
                name=domain.name, power_state=domain.power_state, updated_at=timezone.now()
            )


def test_drivers_own_domain(uri: str) -> str | None:
    """The UUID of the domain libvirt's test driver makes at its start, on a host it serves
    (``uri``); None on any other host."""
    if scheme(uri).partition("+")[0] != TEST_DRIVER:
        return None
    return TEST_DRIVERS_OWN_DOMAIN[0]


def _test_drivers_own(host: Host, domain: driver.DomainReport) -> bool:
    """Whether ``domain`` is the one libvirt's test driver makes at its start (``test``, of a
    fixed UUID) on a host served by that driver (a simulated host): part of the simulation,
    not a domain anyone put on the host, so not listed as one Corral does not manage. Only
    that exact domain, only on test-driver URIs."""
    own = test_drivers_own_domain(host.uri)
    return (own, TEST_DRIVERS_OWN_DOMAIN[1]) == (domain.uuid, domain.name)


def _external_changes(host: Host, domains: list[driver.DomainReport]) -> _ExternalChanges:
    known = {
        str(uuid): (pk, name, power_state)
        for pk, uuid, name, power_state in ExternalDomain.objects.filter(host=host).values_list(
            "pk", "uuid", "name", "power_state"
        )
    }
    seen = {d.uuid for d in domains}
    changes = _ExternalChanges([pk for u, (pk, *_) in known.items() if u not in seen], [], [])
    for domain in domains:
        current = known.get(domain.uuid)
        if current is None:
            changes.new.append(domain)
        elif current[1:] != (domain.name, domain.power_state):
            changes.renamed.append((current[0], domain))
    return changes


def _host_changes(
    host: Host, report: driver.HostReport, used_memory: int, cpu_percent: float | None, now
) -> tuple[bool, dict]:
    """Whether the host comes back (it was not Up), and the host fields the report changes."""
    came_back = host.status != HostStatus.UP
    values = {
        "status": HostStatus.UP,
        "status_detail": "",
        "status_reason": "",
        "cpus": report.cpus,
        "memory_mb": report.memory_mb,
        "memory_used_mb": used_memory,
        "reported_networks": report.networks,
        "storage_capacity_bytes": report.storage.capacity_bytes if report.storage else None,
        "storage_free_bytes": report.storage.free_bytes if report.storage else None,
    }
    if cpu_percent is not None and load.moved(host.cpu_usage_percent, cpu_percent):
        values["cpu_usage_percent"] = cpu_percent
    if report.storage_markers is not None:
        values["storage_checked_at"] = now
        values["storage_problem"] = shared_storage.problem(
            host, report.storage_markers, report.read_at or now
        )
    if report.hypervisor is not None:
        values["domain_type"] = report.hypervisor.domain_type
        values["machine"] = report.hypervisor.machine
        values["emulator"] = report.hypervisor.emulator
    if came_back:
        # Answering again: a confirmation that it was down is void from now on, and a next
        # outage may be fenced again.
        values.update(
            non_responsive_since=None,
            confirmed_down_at=None,
            confirmed_down_by="",
            fence_tried_at=None,
        )
    changed = {k: v for k, v in values.items() if getattr(host, k) != v}
    stale = host.last_seen_at is None or host.last_seen_at < now - timedelta(seconds=60)
    if changed or stale:
        changed["last_seen_at"] = now
    return came_back, changed


def _write_host(host: Host, plan: _Plan, now) -> None:
    if plan.host_values:
        Host.objects.filter(pk=host.pk).update(**plan.host_values, updated_at=now)
        for name, value in plan.host_values.items():
            setattr(host, name, value)
    if plan.came_back:
        events.emit(
            EventKind.CHANGED,
            "host",
            host.pk,
            f"Host {host.name} is Up",
            cluster_id=host.cluster_id,
        )
        transaction.on_commit(lambda: host_returned.send(sender=Host, host=host))
