"""Launching a VM into a lease's reservation. Whether it may, as the VMs API checks it (a rule
registered in ``hosts.checks``): the lease must be active, the reservation have an instance
left, the VM fit the reserved size; the VM goes to the cluster of the reserved hosts. And where
it may run (``reserved_hosts``, registered with the scheduler's ``constraints``): the hosts
with a slot left for it."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.template.defaultfilters import pluralize

from hosts.models import VirtualMachine
from leases.error_codes import LeaseErrorCode
from leases.models import LeaseStatus
from leases.reservations import reserved_slots
from leases.sizes import RESOURCES, quantity
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
    refused = refusal_when_full(reservation, reservation.vms.count())
    if refused is not None:
        raise refused
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


def refusal_when_full(reservation, launched: int) -> Refused | None:
    """Why no VM more may launch into the reservation with ``launched`` VMs in it (None: one
    may): its instances are all launched, or all of what a degraded lease still holds. Whole
    hosts take any number of VMs."""
    if reservation.resource_type != "virtual:instance":
        return None
    amount = reservation.amount or 0
    if launched >= amount:
        message = (
            "The reservation's only instance is launched."
            if amount == 1
            else f"The reservation's {amount} instances are all launched."
        )
        return Refused(LeaseErrorCode.RESERVATION_FULL, message, field="reservation")
    held = amount - reservation.missing
    if reservation.missing and launched >= held:
        return Refused(
            LeaseErrorCode.RESERVATION_DEGRADED,
            f"Lease {reservation.lease.name} is degraded: the reservation holds {held} of its "
            f"{amount} instance{pluralize(amount)}, and {launched} "
            f"{'is' if launched == 1 else 'are'} launched.",
            field="reservation",
        )
    return None


def fit_errors(attrs: dict, reservation) -> dict:
    """Why a VM of this size, in this cluster, does not fit the reservation (field: message)."""
    errors = {}
    if reservation.resource_type == "virtual:instance":
        for name in RESOURCES:
            held = getattr(reservation, name)
            # A reservation of no disk (Blazar's default) leaves the disk to the template.
            if name == "disk_gb" and not held:
                continue
            if attrs.get(name) and attrs[name] > (held or 0):
                errors[name] = f"The reservation holds {quantity(name, held)} per instance."
    clusters = set(reservation.allocations.values_list("host__cluster_id", flat=True)) - {None}
    if attrs.get("cluster") is not None and attrs["cluster"].pk not in clusters:
        errors["cluster"] = "The reservation's hosts are in another cluster."
    return errors


def reserved_hosts(vm: VirtualMachine) -> set[int] | None:
    """For a VM launched into a lease's reservation: the hosts with a slot left for it (none
    while the lease is not active). None for any other VM."""
    if vm.reservation_id is None:
        return None
    reservation = vm.reservation
    if reservation.lease.status != LeaseStatus.ACTIVE:
        return set()
    return {
        host for host, left in reserved_slots(reservation, exclude_vm=vm.pk).items() if left > 0
    }
