"""The stable codes of the hosts app: its refusals (``HostErrorCode``) and why a job failed
(``JobErrorCode``, a job's ``error.code`` in the API)."""

from __future__ import annotations

from project.error_codes import ErrorCode


class HostErrorCode(ErrorCode):
    """Refusals of inventory, VM and host operations, images and consoles."""

    VM_NOT_DOWN = "vm_not_down", "The VM must be shut down first (deleting it)."
    HOST_UNREACHABLE = (
        "host_unreachable",
        "The VM's host does not respond, so its state is unknown and no operation is queued.",
    )
    BAD_STATE = "bad_state", "The VM's status does not allow this operation now."
    NOT_IN_POOL = "not_in_pool", "The VM is in no pool (only a pool's VMs are held or returned)."
    IN_MAINTENANCE = "in_maintenance", "The host is in maintenance already."
    NOT_IN_MAINTENANCE = (
        "not_in_maintenance",
        "The host is not in maintenance; nothing to activate.",
    )
    HOST_NOT_LOST = "host_not_lost", "Only a host that does not respond can be confirmed down."
    CONFIRMED_ALREADY = "confirmed_already", "The host was confirmed down already."
    NOT_LOST_LONG_ENOUGH = (
        "not_lost_long_enough",
        "The host has not been silent long enough to be confirmed down.",
    )
    NO_HOST_KEY_OFFERED = (
        "no_host_key_offered",
        "The host offers no SSH host key that is not trusted already.",
    )
    HOST_KEY_NOT_OFFERED = (
        "host_key_not_offered",
        "The fingerprint confirmed is not that of the key the host offers (it changed since).",
    )
    TRUSTED_KEY_CHANGED = (
        "trusted_key_changed",
        "Another SSH host key than the one shown was trusted for the host since.",
    )
    NOTHING_TO_CANCEL = "nothing_to_cancel", "The job has ended (or never ran); nothing to cancel."
    CONSOLE_UNAVAILABLE = (
        "console_unavailable",
        "The VM shows no screen now: not running, no VNC, or its port not known yet.",
    )
    TERMINAL_UNAVAILABLE = (
        "terminal_unavailable",
        "The VM's serial terminal opens while it runs.",
    )
    EMPTY_IMAGE = "empty_image", "The uploaded image file is empty."
    UNKNOWN_FORMAT = "unknown_format", "The uploaded file is not an image of the kind given."
    BACKING_FILE = "backing_file", "The qcow2 image has a backing or external data file."
    CORRUPT_IMAGE = "corrupt_image", "The qcow2 image is marked corrupt."
    FORMAT_MISMATCH = "format_mismatch", "The file's format is not the format given."
    NAME_TAKEN = "name_taken", "An image with this name exists already."
    IMAGE_IN_USE = "image_in_use", "Templates use the image; change them first."
    IMAGE_TOO_BIG = "image_too_big", "The uploaded file is over the image size limit."
    QUOTA_EXCEEDED = (
        "quota_exceeded",
        "The request would take the user past one of their quota's limits (the answer names "
        "the resource, the limit, the use and what was requested).",
    )
    IMAGE_PUBLISH_REFUSED = (
        "image_publish_refused",
        "Only admins make an image public (owners keep it private, shared or community).",
    )
    IMAGE_NOT_SHARED = "image_not_shared", "Only a shared image has members."
    IMAGE_MEMBER_UNKNOWN = "image_member_unknown", "No user or group of that id."
    IMAGE_MEMBER_EXISTS = "image_member_exists", "The image is offered to that member already."
    NO_DISK_YET = (
        "no_disk_yet",
        "The VM has never been started: it has no disk to snapshot or make an image of yet.",
    )
    SNAPSHOT_NAME_TAKEN = "snapshot_name_taken", "The VM has a snapshot of that name already."
    HAS_SNAPSHOTS = (
        "has_snapshots",
        "The VM has snapshots, which stay in its disk on its host: it does not move (delete "
        "them to migrate it).",
    )
    SNAPSHOTS_REFUSED = (
        "snapshots_refused",
        "The VM takes no snapshots (a stateless pool's VM goes back to its base on return).",
    )
    TEMPLATE_IMAGE_HIDDEN = (
        "template_image_hidden",
        "The user's template boots from an image the VM's maker may not see (no longer shared "
        "with them).",
    )


class JobErrorCode(ErrorCode):
    """Why a job failed (``JobFailed``, the job runner and the reaper). Codes of the host
    driver (``hosts.driver``: ``DriverError.code``) are passed on as they are, so they are
    listed here too."""

    VM_GONE = "vm_gone", "The job's VM was deleted before the job could run."
    NO_HOST = "no_host", "No host can take the VM (the placement says why)."
    HOOK_FAILED = "hook_failed", "A hook run before or after the operation failed."
    HOST_UNREACHABLE = (
        "host_unreachable",
        "The host did not respond, or did not let Corral in (its status says why); a host that "
        "answers and fails the operation fails it with that operation's code, never this.",
    )
    UNEXPECTED_STATE = (
        "unexpected_state",
        "The VM was in another state on its host than the step expected.",
    )
    TIMEOUT = (
        "timeout",
        "The job, or a wait in it (for the VM's state, an image copy), took longer than allowed.",
    )
    NOT_RUNNING = "not_running", "The VM is not running (suspending or migrating it)."
    NOT_PAUSED = "not_paused", "The VM is not suspended (resuming it)."
    NOT_STOPPED = "not_stopped", "The VM is not stopped (deleting it, or a base snapshot)."
    LEASE_NOT_ACTIVE = "lease_not_active", "The VM's lease is not active now."
    BAD_DESTINATION = (
        "bad_destination",
        "The migration's destination is not a host the VM can move to.",
    )
    HOST_NOT_DOWN = (
        "host_not_down",
        "The host is not confirmed down, so its VMs are not failed over.",
    )
    GONE = "gone", "The image or the host the job works on was deleted."
    BAD_VOLUME = "bad_volume", "The volume named is not an image's volume."
    IMAGE_DELETED = (
        "image_deleted",
        "The image was deleted while the job copied it (or made it from a VM).",
    )
    NO_DISK = (
        "no_disk",
        "The VM has no disk on a host to make an image of (it never ran, or its host lost it).",
    )
    VM_PAUSED = (
        "vm_paused",
        "The VM is paused: its guest can neither be frozen nor shut down for a copy of its disk.",
    )
    QUOTA_EXCEEDED = (
        "quota_exceeded",
        "The image made from the VM would take its owner past their image storage quota.",
    )
    BAD_COPY = (
        "bad_copy",
        "The copy of the VM's disk failed the checks every image passes (not kept).",
    )
    TEMPLATE_REFUSED = (
        "template_refused",
        "The image was made, but the template asked for with it was refused (its name taken "
        "since, say).",
    )
    IMAGE_MISSING = "image_missing", "The image's file is missing from the image store."
    COPY_FAILED = "copy_failed", "Copying the image to the host failed."
    STORAGE_NOT_SHARED = (
        "storage_not_shared",
        "The hosts are set to share storage, but their storage pools are not one folder.",
    )
    STORAGE_SHARED_UNSET = (
        "storage_shared_unset",
        "The hosts' storage pools are one folder, but they are not set to share storage.",
    )
    HAS_SNAPSHOTS = (
        "has_snapshots",
        "The VM has snapshots, kept in its disk on its host: it does not move.",
    )
    INTERNAL_ERROR = (
        "internal_error",
        "An unexpected error in Corral (the job's journal and the server log say which).",
    )
    CHANGED_OUTSIDE = (
        "changed_outside",
        "The host's last word on the VM contradicts the job: changed outside Corral.",
    )
    WORKER_LOST = "worker_lost", "The worker running the job stopped responding or is gone."
    # From the host driver.
    DRIVER_ERROR = (
        "driver_error",
        "The host refused or failed the operation (its own words: the job's journal, for admins).",
    )
    DOMAIN_NOT_FOUND = "domain_not_found", "The host has no such VM."
    NOT_SUPPORTED = "not_supported", "The host does not support the operation."
    GUEST_AGENT_UNAVAILABLE = (
        "guest_agent_unavailable",
        "The guest agent did not answer (the guest runs none, or it is not up yet).",
    )
    URI_REFUSED = "uri_refused", "Corral does not open the host's URI."
    NO_STORAGE_POOL = "no_storage_pool", "The host has no storage pool Corral can use."
    NO_ROOM = "no_room", "The host's storage pool has no room for the volume."
    IMAGE_TOO_BIG = (
        "image_too_big",
        "The VM's disk makes an image over the size limit (CORRAL_IMAGE_MAX_BYTES).",
    )


# Job failures that trying the same job again cannot fix: an admin must change something first
# (the host's URI or kind, the image's file). Loops that retry on their own (the prestart
# monitor) give up on the first one, with one alert.
NOT_FIXED_BY_RETRYING = frozenset(
    {
        JobErrorCode.URI_REFUSED,
        JobErrorCode.NOT_SUPPORTED,
        JobErrorCode.IMAGE_MISSING,
        JobErrorCode.BAD_VOLUME,
        JobErrorCode.STORAGE_NOT_SHARED,
        JobErrorCode.STORAGE_SHARED_UNSET,
    }
)
