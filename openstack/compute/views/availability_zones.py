"""Availability zones (``os-availability-zone``): one per cluster the caller may use, available
while one of its hosts is up; the detail (admins) names each zone's hosts.

As Nova lists a non-admin the zones they may boot in, a user's zones are the clusters they may
see or create servers in, those of the pools they take VMs from and those their active
instance reservations hold hosts in: a pool's or a lease's user, who is granted no cluster,
still has the zones their servers run in (and may name one when creating a server).
"""

from __future__ import annotations

from django.db.models import Prefetch
from rest_framework.response import Response

from hosts.models import Host, HostStatus
from openstack.compute.base import NovaView, admin_only
from openstack.compute.queries import zones_of
from project.access.permissions import restrict


class AvailabilityZonesView(NovaView):
    def get(self, request):
        zones = [
            {"zoneName": c.name, "zoneState": {"available": c.available}, "hosts": None}
            for c in zones_of(request.user)
        ]
        return Response({"availabilityZoneInfo": zones})


class AvailabilityZonesDetailView(NovaView):
    def get(self, request):
        admin_only(request.user, "os_compute_api:os-availability-zone:detail")
        hosts = restrict(Host.objects.order_by("name"), request.user, "hosts.view_host")
        clusters = zones_of(request.user).prefetch_related(Prefetch("hosts", queryset=hosts))
        zones = []
        for cluster in clusters:
            members = {
                host.name: {
                    "nova-compute": {
                        "available": host.status == HostStatus.UP,
                        "active": host.status != HostStatus.MAINTENANCE,
                        "updated_at": _time(host.last_seen_at),
                    }
                }
                for host in cluster.hosts.all()
            }
            zones.append(
                {
                    "zoneName": cluster.name,
                    "zoneState": {"available": cluster.available},
                    "hosts": members or None,
                }
            )
        return Response({"availabilityZoneInfo": zones})


def _time(moment) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") if moment is not None else None
