"""VM operations as small steps (XAPI's micro-ops), run by the job runner.

Each operation moves the VM to a transitional status while it runs, works through its steps
(hooks, placement, libvirt calls, waiting for the host to report the result) and returns a
result. Whatever happens, the runner then sets the VM to the stationary state its host
reports (``hosts.jobs.settle``): a failed step never leaves a guess behind.

``power`` starts and stops VMs, ``migrate`` moves them, ``lifecycle`` prepares, reverts and
deletes them, ``failover`` restarts a host's VMs elsewhere once it is confirmed down,
``snapshots`` takes, reverts to and deletes a user's snapshots, ``vm_image`` makes an image
of a VM's disk, ``common`` holds what they share. ``OPERATION_BY_KIND`` is the operation of
each job kind, which the task that runs a job (``hosts.tasks.run_job``) hands to the runner.
"""

from hosts.guests.keys import put_keys
from hosts.models import JobKind
from hosts.operations import disks
from hosts.operations.common import BASE_SNAPSHOT, RUNNING, STOPPED, spec_for, wait_for
from hosts.operations.failover import failover
from hosts.operations.lifecycle import delete, noop, prepare, revert
from hosts.operations.migrate import migrate
from hosts.operations.power import poweroff, resume, shutdown, start, suspend
from hosts.operations.snapshots import delete_snapshots, revert_to_snapshot, take_snapshot
from hosts.operations.vm_image import image_from_vm

OPERATION_BY_KIND = {
    JobKind.START: start,
    JobKind.SHUTDOWN: shutdown,
    JobKind.POWEROFF: poweroff,
    JobKind.SUSPEND: suspend,
    JobKind.RESUME: resume,
    JobKind.MIGRATE: migrate,
    JobKind.DELETE: delete,
    JobKind.PREPARE: prepare,
    JobKind.REVERT: revert,
    JobKind.NOOP: noop,
    JobKind.COPY_IMAGE: disks.copy_image,
    JobKind.DELETE_IMAGE: disks.delete_image_copy,
    JobKind.FAILOVER: failover,
    JobKind.GUEST_KEYS: put_keys,
    JobKind.SNAPSHOT: take_snapshot,
    JobKind.SNAPSHOT_REVERT: revert_to_snapshot,
    JobKind.SNAPSHOT_DELETE: delete_snapshots,
    JobKind.IMAGE_FROM_VM: image_from_vm,
}

__all__ = [
    "BASE_SNAPSHOT",
    "OPERATION_BY_KIND",
    "RUNNING",
    "STOPPED",
    "delete",
    "failover",
    "image_from_vm",
    "migrate",
    "noop",
    "poweroff",
    "prepare",
    "resume",
    "revert",
    "shutdown",
    "spec_for",
    "start",
    "suspend",
    "wait_for",
]
