"""Launching a VM into a lease's reservation, as the VMs API checks it (a rule registered in
``hosts.checks``): the lease must be active, the reservation have an instance left, the VM
fit the reserved size; the VM goes to the cluster of the reserved hosts."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from leases.error_codes import LeaseErrorCode
from leases.models import LeaseStatus
from project.errors import Refused


def check_launch(attrs: dict) -> None:
    """Refuse a VM its reservation cannot take; place it in the reserved hosts' cluster."""
    reservation = attrs.get("reservation")
    if reservation is None:
        return
    lease = reservation.lease
    if lease.status != LeaseStatus.ACTIVE:
        raise Refused(
            LeaseErrorCode.LEASE_NOT_ACTIVE,
            f"Lease {lease.name} is not active; launch from "
            f"{lease.start_date:%Y-%m-%d %H:%M} to {lease.end_date:%Y-%m-%d %H:%M}.",
            field="reservation",
        )
    instances = reservation.resource_type == "virtual:instance"
    launched = reservation.vms.count() if instances else 0
    if instances and launched >= (reservation.amount or 0):
        raise Refused(
            LeaseErrorCode.RESERVATION_FULL,
            f"The reservation's {reservation.amount} instances are all launched.",
            field="reservation",
        )
    held = (reservation.amount or 0) - reservation.missing
    if instances and reservation.missing and launched >= held:
        raise Refused(
            LeaseErrorCode.RESERVATION_DEGRADED,
            f"Lease {lease.name} is degraded: the reservation holds {held} of "
            f"its {reservation.amount} instances, and {launched} are launched.",
            field="reservation",
        )
    if attrs.get("cluster") is None:
        allocation = (
            reservation.allocations.filter(host__isnull=False)
            .select_related("host__cluster")
            .first()
        )
        if allocation is None:
            raise Refused(
                LeaseErrorCode.RESERVATION_WITHOUT_HOSTS,
                "The reservation holds no hosts.",
                field="reservation",
            )
        attrs["cluster"] = allocation.host.cluster
    errors = fit_errors(attrs, reservation)
    if errors:
        # Several fields may be at fault at once (a VM too large in vCPUs and in memory): a
        # ValidationError names each, where a Refused names one field.
        raise ValidationError(errors)


def fit_errors(attrs: dict, reservation) -> dict:
    """Why a VM of this size, in this cluster, does not fit the reservation (field: message)."""
    errors = {}
    if reservation.resource_type == "virtual:instance":
        for name in ("vcpus", "memory_mb"):
            if attrs.get(name) and attrs[name] > (getattr(reservation, name) or 0):
                errors[name] = f"The reservation holds {getattr(reservation, name)} per instance."
    clusters = set(reservation.allocations.values_list("host__cluster_id", flat=True)) - {None}
    if attrs.get("cluster") is not None and attrs["cluster"].pk not in clusters:
        errors["cluster"] = "The reservation's hosts are in another cluster."
    return errors
