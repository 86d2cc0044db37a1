"""Snapshots a VM's user takes, reverts to and deletes: each a job on the VM's queue (one job
at a time per VM), each row a ``VmSnapshot``.

- **Taking** one (``take``) needs a VM with a disk (started once, so defined on a host); with
  ``memory`` (a running or paused VM only) the VM's memory and running state are kept too and
  a revert resumes it where it was. The snapshot counts against the quota of the VM's holder
  (or of whoever takes it, for a VM nobody holds): one snapshot, and as much disk as it may come
  to hold (``hosts.quotas.for_snapshot``).
- **Reverting** (``revert``) brings the disk back, and with a memory snapshot the memory and
  running state; a disk-only snapshot leaves the VM shut off with that disk.
- **Deleting** (``delete``) removes it from the disk; ``drop_all`` deletes every snapshot of a
  VM (a pool takes its VM back; its holder's snapshots go).
- Other apps refuse snapshots through ``hosts.checks.operation_rules`` (the pools app: a
  stateless pool's VMs take none). A VM with snapshots does not migrate
  (``hosts.services.refuse_moving_snapshots``) and starts only on the host that keeps them.
"""

from __future__ import annotations

from django.db import transaction

from hosts import jobs, quotas, services
from hosts.error_codes import HostErrorCode
from hosts.models import (
    Job,
    JobKind,
    SnapshotStatus,
    VirtualMachine,
    VmSnapshot,
    VmStatus,
)
from project.errors import Refused

# Where a VM can be when nothing else is queued on it.
TAKE_FROM = {VmStatus.UP, VmStatus.PAUSED, VmStatus.DOWN}
WITH_MEMORY_FROM = {VmStatus.UP, VmStatus.PAUSED}
REVERT_FROM = {VmStatus.UP, VmStatus.PAUSED, VmStatus.DOWN}
DELETE_FROM = {VmStatus.UP, VmStatus.PAUSED, VmStatus.DOWN, VmStatus.UNKNOWN}


@transaction.atomic
def take(
    vm: VirtualMachine, *, name: str, description: str = "", memory: bool = False, requested_by
) -> tuple[VmSnapshot, Job]:
    """Queue a snapshot of ``vm`` (the row, being taken, and its job); refused with a field
    message for bad input, 409 for a VM that cannot take one now or a quota it would pass."""
    vm = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
    if vm.host_id is None:
        raise Refused(
            HostErrorCode.NO_DISK_YET,
            f"VM {vm.name} has never been started: it has no disk to snapshot yet.",
        )
    if memory and vm.status not in WITH_MEMORY_FROM:
        raise Refused(
            HostErrorCode.BAD_STATE,
            f"VM {vm.name} is {vm.get_status_display()}: only a running VM's memory can be "
            "saved. Take a disk-only snapshot, or start it first.",
            field="memory",
        )
    if VmSnapshot.objects.filter(vm=vm, name=name).exists():
        raise Refused(
            HostErrorCode.SNAPSHOT_NAME_TAKEN,
            f"VM {vm.name} has a snapshot named {name} already.",
            field="name",
        )
    holder = vm.owner if vm.owner_id is not None else requested_by
    quotas.charge(holder, quotas.for_snapshot(vm, memory))
    # The VM's row is locked: no other snapshot of it can take the name meanwhile.
    snapshot = VmSnapshot.objects.create(
        vm=vm,
        name=name,
        description=description,
        memory=memory,
        owner=holder,
        disk_gb=quotas.snapshot_disk_gb(vm, memory),
    )
    job = services.request_operation(
        vm,
        JobKind.SNAPSHOT,
        requested_by=requested_by,
        params={"snapshot": snapshot.pk},
        allowed=TAKE_FROM,
    )
    return snapshot, job


def _ready(snapshot: VmSnapshot) -> None:
    if snapshot.status != SnapshotStatus.READY:
        raise Refused(
            HostErrorCode.BAD_STATE,
            f"Snapshot {snapshot.name} is {snapshot.get_status_display().lower()}.",
        )


@transaction.atomic
def revert(snapshot: VmSnapshot, *, requested_by) -> Job:
    """Queue bringing the VM back to ``snapshot``."""
    _ready(snapshot)
    return services.request_operation(
        snapshot.vm,
        JobKind.SNAPSHOT_REVERT,
        requested_by=requested_by,
        params={"snapshot": snapshot.pk},
        allowed=REVERT_FROM,
    )


@transaction.atomic
def delete(snapshot: VmSnapshot, *, requested_by) -> Job:
    """Queue deleting ``snapshot`` (it shows as being deleted until the job has)."""
    if snapshot.status == SnapshotStatus.DELETING:
        raise Refused(
            HostErrorCode.BAD_STATE, f"Snapshot {snapshot.name} is being deleted already."
        )
    job = services.request_operation(
        snapshot.vm,
        JobKind.SNAPSHOT_DELETE,
        requested_by=requested_by,
        params={"snapshot": snapshot.pk},
        allowed=DELETE_FROM,
    )
    VmSnapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.DELETING)
    return job


def drop_all(vm: VirtualMachine, *, requested_by=None) -> Job | None:
    """Queue deleting every snapshot of ``vm`` (inside the caller's transaction); None when it
    has none. What a pool does when it takes its VM back."""
    if not VmSnapshot.objects.filter(vm=vm).exists():
        return None
    VmSnapshot.objects.filter(vm=vm).update(status=SnapshotStatus.DELETING)
    return jobs.submit(
        JobKind.SNAPSHOT_DELETE, vm=vm, params={"all": True}, requested_by=requested_by
    )
