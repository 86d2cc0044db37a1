"""The stable codes of the pools app's refusals."""

from __future__ import annotations

from project.error_codes import ErrorCode


class PoolErrorCode(ErrorCode):
    """Refusals of taking VMs from a pool and of changing a pool. (A VM in no pool is
    ``hosts``' ``not_in_pool``.)"""

    POOL_EXHAUSTED = "pool_exhausted", "No VM of the pool is free now; try again later."
    USER_LIMIT = "user_limit", "The user holds as many VMs of the pool as one may."
    CANNOT_SHRINK = "cannot_shrink", "Too few of the pool's VMs are unassigned to remove that many."
    VM_TAKEN = "vm_taken", "The VM was given to a user meanwhile; it was not removed."
    POOL_IN_USE = (
        "pool_in_use",
        "Users hold VMs of the pool; return them first, or delete with force.",
    )
    VM_CREATE_FAILED = "vm_create_failed", "The pool's new VMs could not be created."
