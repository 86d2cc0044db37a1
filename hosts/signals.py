"""Signals the apps above hosts listen to: pools return VMs to their pool when they stop, leases
move reserved capacity off a host that stops answering, the balancer tracks each host's load."""

from django.dispatch import Signal

# A VM that was running went down (its user shut it down, or it stopped outside Corral).
# Sent after the change is committed. kwargs: vm_id.
vm_stopped = Signal()

# A job ended. Sent after it is committed. kwargs: job (with its final state).
job_finished = Signal()

# A host's report was just written (inside the sync's transaction, the host row locked).
# kwargs: host (as updated by the report).
host_reported = Signal()

# A host went out of use without being put in maintenance: NonResponsive, or Error (a URI
# Corral refuses to open). Sent after it is committed. kwargs: host.
host_unreachable = Signal()
