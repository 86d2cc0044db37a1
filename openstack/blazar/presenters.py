"""Blazar's shapes: leases, reservations, events, hosts and allocations as Blazar answers them.

Times go out as Blazar writes them, ``%Y-%m-%dT%H:%M:%S.%f`` in UTC without a zone: its client
parses exactly that format (``lease set --prolong-for`` fails on anything else).
"""

from __future__ import annotations

from datetime import UTC, datetime

from hosts.models import Host
from leases.models import Lease, Reservation, ResourceType
from leases.properties import HYPERVISOR_PROPERTIES, expression
from openstack.compute.group_ids import reservation_group_id

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"


def blazar_time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime(TIME_FORMAT)


def reservation_view(reservation: Reservation, lease: Lease) -> dict:
    properties = reservation.host_properties or {}
    data = {
        "id": str(reservation.pk),
        "lease_id": str(lease.uuid),
        "resource_id": str(reservation.pk),
        "resource_type": reservation.resource_type,
        "status": reservation.status,
        "missing_resources": reservation.missing > 0,
        "resources_changed": False,
        "created_at": blazar_time(reservation.created_at),
        "updated_at": blazar_time(reservation.updated_at),
    }
    if reservation.resource_type == ResourceType.HOST:
        data.update(
            min=reservation.min,
            max=reservation.max,
            hypervisor_properties=expression(
                {k: v for k, v in properties.items() if k in HYPERVISOR_PROPERTIES}
            ),
            resource_properties=expression(
                {k: v for k, v in properties.items() if k not in HYPERVISOR_PROPERTIES}
            ),
            before_end="default",
        )
    else:
        data.update(
            vcpus=reservation.vcpus,
            memory_mb=reservation.memory_mb,
            disk_gb=reservation.disk_gb,
            amount=reservation.amount,
            affinity=reservation.affinity,
            resource_properties=expression(properties),
            # Blazar's flavor is named by the reservation's id; its server group exists only
            # for an affinity of True or False.
            flavor_id=str(reservation.pk),
            server_group_id=reservation_group_id(reservation),
        )
    return data


def lease_view(lease: Lease) -> dict:
    """A lease as Blazar shows it (reservations and events prefetched by the caller)."""
    return {
        "id": str(lease.uuid),
        "name": lease.name,
        "user_id": str(lease.owner_id),
        "project_id": str(lease.owner_id),
        "start_date": blazar_time(lease.start_date),
        "end_date": blazar_time(lease.end_date),
        "before_end_date": blazar_time(lease.before_end_date),
        "status": lease.status,
        "degraded": lease.degraded,
        "trust_id": None,
        "created_at": blazar_time(lease.created_at),
        "updated_at": blazar_time(lease.updated_at),
        "reservations": [reservation_view(r, lease) for r in lease.reservations.all()],
        "events": [
            {
                "id": str(event.pk),
                "lease_id": str(lease.uuid),
                "event_type": event.event_type,
                "time": blazar_time(event.time),
                "status": event.status,
            }
            for event in lease.events.all()
        ],
    }


def host_view(host: Host) -> dict:
    """A reservable host as Blazar shows it: the host's own fields, then its extra
    capabilities as keys of their own."""
    return {
        **{key: value for key, value in (host.capabilities or {}).items() if key not in HOST_KEYS},
        "id": str(host.pk),
        "hypervisor_hostname": host.name,
        "service_name": host.name,
        "hypervisor_type": host.uri.split(":", 1)[0].split("+", 1)[0],
        "hypervisor_version": None,
        "vcpus": host.cpus,
        "memory_mb": host.memory_mb,
        "local_gb": None,
        "cpu_info": None,
        "availability_zone": host.cluster.name,
        "status": host.status,
        "reservable": host.reservable,
        "trust_id": None,
        "created_at": blazar_time(host.created_at),
        "updated_at": blazar_time(host.updated_at),
    }


# A host's own fields in Blazar's view: no extra capability may take one of these names.
HOST_KEYS = frozenset(
    {
        "id",
        "name",
        "hypervisor_hostname",
        "service_name",
        "hypervisor_type",
        "hypervisor_version",
        "vcpus",
        "memory_mb",
        "local_gb",
        "cpu_info",
        "availability_zone",
        "status",
        "reservable",
        "trust_id",
        "created_at",
        "updated_at",
    }
)
