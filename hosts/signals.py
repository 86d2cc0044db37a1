"""Signals the apps above hosts listen to: pools return VMs to their pool when they stop, leases
move reserved capacity off a host that stops answering or is taken out of service (and take it
back when the host returns), the balancer tracks each host's load."""

from django.dispatch import Signal

# A VM that was running went down: its user shut it down, or it stopped outside Corral, or
# (``with_host=True``) it stopped with its host: the host restarted or failed while Corral could
# not see it (hosts.sync.unseen), or was confirmed down (failover). Sent after the change is
# committed. kwargs: vm_id, with_host.
vm_stopped = Signal()

# A job ended. Sent after it is committed. kwargs: job (with its final state).
job_finished = Signal()

# A host's report was just applied: inside the sync's transaction, the host row locked, when
# it changed anything; outside any transaction when it changed nothing (and wrote nothing).
# kwargs: host (as updated by the report), committed_vcpus (the vCPUs of the VMs the host
# holds or that are migrating to it).
host_reported = Signal()

# A host went out of use without being put in maintenance: NonResponsive, or Error (a URI
# Corral refuses to open). Sent after it is committed. kwargs: host.
host_unreachable = Signal()

# A host is being taken out of service: put in maintenance (reason "maintenance"). Sent inside
# the transaction that does it, before the host's row is locked or changed, so a listener may
# lock rows in its own order and move what the host held before its VMs are migrated away; an
# exception rolls the whole operation back. kwargs: host, reason.
host_withdrawn = Signal()

# A host is back in service: a report brought it Up from any other status (NonResponsive,
# Error, Connecting after maintenance or when new). Sent after it is committed. kwargs: host.
host_returned = Signal()

# Every host-fence hook of a host NonResponsive past the grace exited 0 (hosts.sync.fencing),
# which cannot queue jobs itself: the sync lies below the job runner. Sent outside any
# transaction; hosts.services confirms the host down, as an admin would. kwargs: host,
# fenced_by (the hooks, "hook host-fence/10-ipmi").
host_fenced = Signal()

# Running guests hold other SSH keys than their holders' (the guest-info loop found them; it
# cannot queue jobs itself: the sync lies below the job runner). Sent outside any transaction;
# a guest_keys job is queued for each that has no job. kwargs: vms (with their templates).
guest_keys_stale = Signal()
