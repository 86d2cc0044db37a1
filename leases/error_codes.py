"""The stable codes of the leases app's refusals (its API and Blazar's)."""

from __future__ import annotations

from project.error_codes import ErrorCode


class LeaseErrorCode(ErrorCode):
    """Refusals of creating, changing and launching into leases, and of reservable hosts."""

    LEASE_REFUSED = (
        "lease_refused",
        (
            "The lease or its change does not fit the capacity, the quotas, the longest duration or"
            " the VMs it runs, or the lease has ended or started (the message says which)."
        ),
    )
    HOST_REFUSED = (
        "host_refused",
        "The host is reservable already, or leases hold or use it so it cannot change.",
    )
    UNKNOWN_RESERVATION = "unknown_reservation", "The lease has no reservation of that id."
    RESOURCE_TYPE_FIXED = "resource_type_fixed", "A reservation's resource_type cannot change."
    NOT_OF_RESOURCE_TYPE = (
        "not_of_resource_type",
        "The change names fields the reservation's resource type does not have.",
    )
    MIN_ABOVE_MAX = "min_above_max", "A host reservation's max must be at least its min."
    DATE_OUT_OF_RANGE = "date_out_of_range", "The change moves a date out of the range of times."
    END_BEFORE_START = "end_before_start", "The lease must end after it starts."
    END_IN_PAST = "end_in_past", "The lease must end in the future."
    BEFORE_END_OUTSIDE_LEASE = (
        "before_end_outside_lease",
        "The warning before the end must be between the lease's start and end.",
    )
    LEASE_NOT_ACTIVE = "lease_not_active", "VMs are launched into a lease only while it is active."
    RESERVATION_FULL = "reservation_full", "The reservation's instances are all launched."
    RESERVATION_DEGRADED = (
        "reservation_degraded",
        "The lease is degraded: what the reservation still holds is all launched.",
    )
    RESERVATION_WITHOUT_HOSTS = "reservation_without_hosts", "The reservation holds no hosts."
