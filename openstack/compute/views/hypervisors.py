"""Hypervisors (``os-hypervisors``, admins only): Corral's hosts as Nova's compute nodes.

A host is up while Corral reaches it (Up, or in maintenance: disabled then); its vCPUs and
memory used are what its VMs are given, counted as the scheduler counts them
(``hosts.usage``); its disk is its storage pool's. Ids are the hosts' keys (Nova's integer ids
before 2.53). Corral does not read the hypervisor's version or CPU description, nor its
uptime: the version is 0, ``cpu_info`` empty and ``uptime`` a 501, as for a driver without it.
"""

from __future__ import annotations

from rest_framework.exceptions import APIException
from rest_framework.response import Response

from hosts.models import Host, VirtualMachine
from openstack.compute.base import NovaView, admin_only, missing
from openstack.compute.presenters import (
    hypervisor_detail,
    hypervisor_figure_names,
    hypervisor_figures,
    hypervisor_summary,
)
from openstack.compute.queries import hosts_of

POLICY = "os_compute_api:os-hypervisors:{}"


class NotImplementedByDriver(APIException):
    status_code = 501


def matching(hosts, pattern: str):
    found = hosts.filter(name__icontains=pattern)
    if not found:
        raise missing(f"No hypervisor matching '{pattern}' could be found.")
    return found


class HypervisorsView(NovaView):
    detailed = False

    def get(self, request):
        admin_only(request.user, POLICY.format("list-detail" if self.detailed else "list"))
        hosts = hosts_of(request.user)
        pattern = request.query_params.get("hypervisor_hostname_pattern")
        if pattern is not None:
            hosts = matching(hosts, pattern)
        shown = [
            hypervisor_detail(self, h) if self.detailed else hypervisor_summary(h) for h in hosts
        ]
        return Response({"hypervisors": shown})


class HypervisorsDetailView(HypervisorsView):
    detailed = True


class HypervisorView(NovaView):
    def get(self, request, hypervisor_id: str):
        admin_only(request.user, POLICY.format("show"))
        return Response({"hypervisor": hypervisor_detail(self, self.host(hypervisor_id))})

    def host(self, hypervisor_id: str) -> Host:
        found = None
        if hypervisor_id.isdigit() and len(hypervisor_id) < 19:
            found = hosts_of(self.request.user).filter(pk=int(hypervisor_id)).first()
        if found is None:
            raise missing(f"Hypervisor with ID '{hypervisor_id}' could not be found.")
        return found


class HypervisorUptimeView(HypervisorView):
    def get(self, request, hypervisor_id: str):
        admin_only(request.user, POLICY.format("uptime"))
        self.host(hypervisor_id)
        raise NotImplementedByDriver("Virt driver does not implement uptime function.")


class HypervisorSearchView(NovaView):
    """Before 2.53: the hypervisors whose name holds a pattern (``/{pattern}/search``), or
    those with their servers (``/{pattern}/servers``)."""

    with_servers = False

    def get(self, request, pattern: str):
        admin_only(request.user, POLICY.format("servers" if self.with_servers else "search"))
        hosts = list(matching(hosts_of(request.user), pattern))
        shown = [hypervisor_summary(h) for h in hosts]
        if self.with_servers:
            vms = VirtualMachine.objects.filter(host__in=hosts).order_by("name")
            by_host: dict[int, list[dict]] = {}
            for host_id, name, vm_uuid in vms.values_list("host_id", "name", "uuid"):
                by_host.setdefault(host_id, []).append({"name": name, "uuid": str(vm_uuid)})
            for host, body in zip(hosts, shown, strict=True):
                if host.pk in by_host:
                    body["servers"] = by_host[host.pk]
        return Response({"hypervisors": shown})


class HypervisorServersView(HypervisorSearchView):
    with_servers = True


class HypervisorStatisticsView(NovaView):
    def get(self, request):
        admin_only(request.user, POLICY.format("statistics"))
        totals = {"count": 0}
        for host in hosts_of(request.user):
            totals["count"] += 1
            for name, value in hypervisor_figures(host).items():
                totals[name] = totals.get(name, 0) + value
        if totals["count"] == 0:
            totals |= {name: 0 for name in hypervisor_figure_names()}
        return Response({"hypervisor_statistics": totals})
