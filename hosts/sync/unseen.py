"""A host seen again after Corral lost sight of it: what stopped meanwhile stopped with the host.

Corral blames a change on someone (an alert "stopped outside Corral", a pool taking its VM back)
only when it watched the change happen. A host it could not see — not responding, in error, in
maintenance, or simply not synced for ``CORRAL_HOST_UNSEEN_AFTER`` (Corral itself was stopped)
— may have restarted meanwhile: a KVM host that reboots loses its running guests, keeping the
persistent ones defined and shut off. So the first report after such a gap finds the VMs that
ran there off or gone because of the host, not by their users' hand: they go Down at once (no
grace for a missing domain: the report lists a host that is back), keep their holders, and one
alert on the host names them; the apps above hear ``vm_stopped`` with ``with_host=True``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from hosts import driver
from hosts.models import Host, HostStatus, PowerState, VirtualMachine, VmStatus
from hosts.sync.reconcile import RUNNING_STATUSES


def unseen_after() -> timedelta:
    """How long without a report makes a host out of sight (never under three sync
    intervals: a watched host's ``last_seen_at`` may lag by about one)."""
    return timedelta(
        seconds=max(settings.CORRAL_HOST_UNSEEN_AFTER, 3 * settings.CORRAL_SYNC_INTERVAL)
    )


def out_of_sight(host: Host, now: datetime) -> bool:
    """Whether Corral could not see ``host`` until this report: it was not Up, or it was
    last seen longer ago than ``unseen_after()``. A host never seen had nothing to lose."""
    if host.last_seen_at is None:
        return False
    return host.status != HostStatus.UP or host.last_seen_at < now - unseen_after()


def stopped_there(vm: VirtualMachine, host: Host, state: str) -> bool:
    """Whether the VM ran on ``host`` when Corral lost sight of it (a host that stopped
    responding left it Unknown, noting whether it ran) and the host reports it off or gone
    (``state``) now."""
    ran = vm.status in RUNNING_STATUSES or (vm.status == VmStatus.UNKNOWN and vm.running_when_lost)
    return ran and vm.host_id == host.pk and state not in driver.ACTIVE_STATES


def stopped_with_host(vm: VirtualMachine, state: str) -> set[str]:
    """The VM went down with its host: Down, and placed nowhere if the host lost its
    domain; the fields changed."""
    vm.status = VmStatus.DOWN
    vm.running_when_lost = False
    changed = {"status", "running_when_lost"}
    if state == PowerState.REPORT_MISSING:
        vm.host = None
        changed.add("host")
    return changed


def alert_text(host: Host, vms: list[VirtualMachine]) -> str:
    """The one alert naming the VMs that stopped with ``host`` (as it was before this report)."""
    since = host.last_seen_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    names = ", ".join(vm.name for vm in sorted(vms, key=lambda vm: vm.name))
    return (
        f"Host {host.name} is back after Corral lost sight of it (last seen {since}): the VMs "
        f"that ran there stopped meanwhile, as when a host restarts, not by anyone's hand: "
        f"{names}. They stay with their holders, Down."
    )


def event_text(vm: VirtualMachine, host: Host) -> str:
    return (
        f"VM {vm.name} is Down: it stopped with its host {host.name} while Corral lost sight of it"
    )
