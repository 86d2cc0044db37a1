"""Availability zones (``os-availability-zone``): one per cluster the caller may use, available
while one of its hosts is up; the detail (admins) names each zone's hosts.

As Nova lists a non-admin the zones they may boot in, a user's zones are the clusters they may
see or create servers in, those of the pools they take VMs from and those their active
instance reservations hold hosts in: a pool's or a lease's user, who is granted no cluster,
still has the zones their servers run in (and may name one when creating a server).
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Prefetch, Q
from rest_framework.response import Response

from hosts.models import Cluster, Host, HostStatus
from leases.models import Allocation
from openstack.compute.base import NovaView
from openstack.compute.flavors import admin_only, reservations_of
from pools.models import VmPool
from project.permissions import restrict


def zones_of(user):
    """The clusters ``user`` may use (see the module's docstring), by name, each annotated
    ``available`` (one of its hosts is Up); one query."""
    clusters = Cluster.objects.all()
    seen = restrict(clusters, user, "hosts.view_cluster").values("pk")
    creating = restrict(clusters, user, "hosts.add_virtualmachine").values("pk")
    pooled = restrict(VmPool.objects.all(), user, "pools.allocate_vmpool").values("cluster_id")
    reserved = Allocation.objects.filter(reservation__in=reservations_of(user)).values(
        "host__cluster_id"
    )
    up = Host.objects.filter(cluster=OuterRef("pk"), status=HostStatus.UP)
    return (
        clusters.filter(Q(pk__in=seen) | Q(pk__in=creating) | Q(pk__in=pooled) | Q(pk__in=reserved))
        .annotate(available=Exists(up))
        .order_by("name")
    )


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
