"""After any job: the VM takes the stationary state its host reports, and a job whose VM the
host reports other than the job left it (changed outside Corral meanwhile) fails."""

from __future__ import annotations

from hosts import driver
from hosts.models import JobKind, PowerState, VirtualMachine
from hosts.sync import reconcile_vm

# libvirt power states of a domain that runs, and of one that is off.
RUNNING = {"running", "blocked"}
STOPPED = {"shutoff", "crashed"}


def finish_vm(vm_id: int, *, succeeded: bool) -> VirtualMachine | None:
    """After a job: the VM takes the stationary state its host reports (never a guess);
    returns it so settled (None when the job deleted it).

    An interrupted migration is resolved by asking both hosts where the domain is.
    """
    vm = VirtualMachine.objects.select_related("host", "migrating_to").filter(pk=vm_id).first()
    if vm is None:
        return None  # deleted by the job
    if vm.migrating_to_id is not None:
        landed = vm.migrating_to
        try:
            there = driver.domain_power_state(landed.uri, str(vm.uuid))
        except driver.DriverError:
            there = None
        fields = {"migrating_to": None}
        if there is not None:
            fields["host"] = landed
        VirtualMachine.objects.filter(pk=vm_id).update(**fields)
    return reconcile_vm(vm_id)


# What the host must report once an operation has succeeded. Anything else is a change made
# outside Corral while the job ran, after its own wait: it contradicts the job, so it fails it.
EXPECTED_STATES = {
    JobKind.START: RUNNING,
    JobKind.RESUME: RUNNING,
    JobKind.SHUTDOWN: STOPPED | {PowerState.REPORT_MISSING},
    JobKind.POWEROFF: STOPPED | {PowerState.REPORT_MISSING},
    JobKind.SUSPEND: {"paused"},
    JobKind.MIGRATE: RUNNING | {"paused"},  # a paused VM migrates paused
}
BEING = {
    JobKind.START: "started",
    JobKind.RESUME: "resumed",
    JobKind.SHUTDOWN: "shut down",
    JobKind.POWEROFF: "powered off",
    JobKind.SUSPEND: "suspended",
    JobKind.MIGRATE: "migrated",
}
HAPPENED = {
    "running": "was started outside Corral",
    "blocked": "was started outside Corral",
    "paused": "was paused outside Corral",
    "pmsuspended": "was paused outside Corral",
    "shutdown": "began shutting down outside Corral",
    "shutoff": "was shut off outside Corral",
    "crashed": "crashed",
    PowerState.REPORT_MISSING: "was removed from its host outside Corral",
}


def changed_outside(kind: str, vm: VirtualMachine) -> str:
    """Why the settled ``vm`` contradicts its just-succeeded ``kind`` job ("" when it does not).

    Reads what ``finish_vm`` just asked the host: no further libvirt call.
    """
    wanted = EXPECTED_STATES.get(kind)
    state = vm.power_state if vm.host_id is not None else PowerState.REPORT_MISSING
    if wanted is None or state in wanted or state == PowerState.UNKNOWN:
        return ""  # an unreachable host says nothing either way: the sync will tell
    happened = HAPPENED.get(state, f"became {state} outside Corral")
    if state in RUNNING and kind == JobKind.SUSPEND:
        happened = "was resumed outside Corral"
    return (
        f"VM {vm.name} {happened} while it was being {BEING[kind]}; "
        f"it is {vm.get_status_display()} now."
    )
