"""A user's snapshots of a VM, as jobs: take one, revert to one, delete one (or all).

libvirt keeps them inside the VM's disk on its host (internal qcow2 snapshots): nothing to copy,
a revert is one call, and a snapshot goes with the disk when the VM is deleted. libvirt takes
an internal snapshot of a running VM only with its memory; a disk-only snapshot of a running
VM is therefore taken with it too, and its revert leaves the VM shut off with the snapshot's
disk, as the user asked (``hosts.driver.revert_to_snapshot``).
"""

from __future__ import annotations

from django.db import transaction

from hosts import driver
from hosts.error_codes import JobErrorCode
from hosts.jobs import JobContext, JobFailed
from hosts.models import SnapshotStatus, VirtualMachine, VmSnapshot
from hosts.operations.common import host_call


def _snapshot_of(ctx: JobContext, vm: VirtualMachine) -> VmSnapshot:
    snapshot = VmSnapshot.objects.filter(pk=ctx.job.params.get("snapshot"), vm=vm).first()
    if snapshot is None:
        raise JobFailed(JobErrorCode.GONE, "The snapshot was deleted before the job could run.")
    return snapshot


def _make_current(snapshot: VmSnapshot) -> None:
    with transaction.atomic():
        VmSnapshot.objects.filter(vm_id=snapshot.vm_id, current=True).update(current=False)
        VmSnapshot.objects.filter(pk=snapshot.pk).update(current=True)


def take_snapshot(ctx: JobContext) -> dict:
    """Take the snapshot the job names; a snapshot that could not be taken is no more."""
    vm = ctx.refresh_vm()
    snapshot = _snapshot_of(ctx, vm)
    try:
        if vm.host is None:
            raise JobFailed(
                JobErrorCode.UNEXPECTED_STATE, f"VM {vm.name} is on no host: it has no disk."
            )
        saved = " with its memory" if snapshot.memory else ""
        ctx.step(f"Taking snapshot {snapshot.name}{saved} on {vm.host.name}", 0.3)
        size = host_call(driver.take_snapshot, vm.host.uri, str(vm.uuid), snapshot.libvirt_name)
    except BaseException:
        VmSnapshot.objects.filter(pk=snapshot.pk).delete()
        raise
    VmSnapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.READY, size_bytes=size)
    _make_current(snapshot)
    return {"snapshot": snapshot.name, "memory": snapshot.memory, "size_bytes": size}


def revert_to_snapshot(ctx: JobContext) -> dict:
    """Bring the VM back to the job's snapshot (with its memory and running state when it was
    saved with them; shut off with its disk otherwise)."""
    vm = ctx.refresh_vm()
    snapshot = _snapshot_of(ctx, vm)
    if vm.host is None:
        raise JobFailed(JobErrorCode.UNEXPECTED_STATE, f"VM {vm.name} is on no host.")
    after = "where it was" if snapshot.memory else "shut off"
    ctx.step(f"Reverting to snapshot {snapshot.name} ({after}) on {vm.host.name}", 0.4)
    host_call(
        lambda: driver.revert_to_snapshot(
            vm.host.uri, str(vm.uuid), snapshot.libvirt_name, with_memory=snapshot.memory
        )
    )
    _make_current(snapshot)
    return {"snapshot": snapshot.name, "memory": snapshot.memory}


def delete_snapshots(ctx: JobContext) -> dict:
    """Delete the job's snapshot, or every snapshot of the VM (``all``): from its disk on its
    host, then here. One the host no longer has is deleted here all the same."""
    vm = ctx.refresh_vm()
    if ctx.job.params.get("all"):
        doomed = list(VmSnapshot.objects.filter(vm=vm).order_by("-created_at", "-pk"))
    else:
        doomed = [_snapshot_of(ctx, vm)]
    deleted = []
    try:
        for index, snapshot in enumerate(doomed):
            if vm.host is not None:
                ctx.step(f"Deleting snapshot {snapshot.name}", 0.2 + 0.7 * index / len(doomed))
                host_call(driver.delete_snapshot, vm.host.uri, str(vm.uuid), snapshot.libvirt_name)
            VmSnapshot.objects.filter(pk=snapshot.pk).delete()
            deleted.append(snapshot.name)
    except BaseException:
        # What is left is there still: it may be reverted to or deleted again.
        left = [snapshot.pk for snapshot in doomed if snapshot.name not in deleted]
        VmSnapshot.objects.filter(pk__in=left).update(status=SnapshotStatus.READY)
        raise
    return {"deleted": deleted}
