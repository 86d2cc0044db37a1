"""Signals other apps listen to (pools return VMs to their pool when they stop)."""

from django.dispatch import Signal

# A VM that was running went down (its user shut it down, or it stopped outside Corral).
# Sent after the change is committed. kwargs: vm_id.
vm_stopped = Signal()

# A job ended. Sent after it is committed. kwargs: job (with its final state).
job_finished = Signal()
