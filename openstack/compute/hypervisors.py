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

from hosts.driver.uris import host_name, is_local
from hosts.models import Host, HostStatus, VirtualMachine
from hosts.usage import with_usage
from openstack.compute.base import NovaView, missing
from openstack.compute.flavors import admin_only
from project.permissions import restrict

POLICY = "os_compute_api:os-hypervisors:{}"
GIB = 1024**3
ALIVE = (HostStatus.UP, HostStatus.MAINTENANCE)


class NotImplementedByDriver(APIException):
    status_code = 501


def hosts_of(user):
    return with_usage(restrict(Host.objects.all(), user, "hosts.view_host")).order_by("pk")


def _gib(value: int | None) -> int:
    return (value or 0) // GIB


def summary(host: Host) -> dict:
    return {
        "id": host.pk,
        "hypervisor_hostname": host.name,
        "state": "up" if host.status in ALIVE else "down",
        "status": "disabled" if host.status == HostStatus.MAINTENANCE else "enabled",
    }


def figures(host: Host) -> dict:
    """The counted fields of a hypervisor (and of the statistics, summed)."""
    memory = host.memory_mb or 0
    used_memory = host.committed_memory_mb or 0
    capacity, free = host.storage_capacity_bytes or 0, host.storage_free_bytes or 0
    return {
        "vcpus": host.cpus or 0,
        "vcpus_used": host.committed_vcpus or 0,
        "memory_mb": memory,
        "memory_mb_used": used_memory,
        "free_ram_mb": memory - used_memory,
        "local_gb": _gib(capacity),
        "local_gb_used": _gib(max(capacity - free, 0)),
        "free_disk_gb": _gib(free),
        "disk_available_least": _gib(free),
        "current_workload": 0,
        "running_vms": host.running_vms or 0,
    }


def detail(view: NovaView, host: Host) -> dict:
    maintenance = host.status == HostStatus.MAINTENANCE
    return {
        **summary(host),
        "hypervisor_type": "QEMU",
        "hypervisor_version": 0,
        "host_ip": None if is_local(host.uri) else host_name(host.uri),
        "service": {
            "host": host.name,
            "id": host.pk,
            "disabled_reason": (host.status_detail or "maintenance") if maintenance else None,
        },
        **figures(host),
        "cpu_info": {} if view.at_least(2, 28) else "{}",
    }


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
        shown = [detail(self, h) if self.detailed else summary(h) for h in hosts]
        return Response({"hypervisors": shown})


class HypervisorsDetailView(HypervisorsView):
    detailed = True


class HypervisorView(NovaView):
    def get(self, request, hypervisor_id: str):
        admin_only(request.user, POLICY.format("show"))
        return Response({"hypervisor": detail(self, self.host(hypervisor_id))})

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
        shown = [summary(h) for h in hosts]
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
            for name, value in figures(host).items():
                totals[name] = totals.get(name, 0) + value
        if totals["count"] == 0:
            totals |= {name: 0 for name in figures_names()}
        return Response({"hypervisor_statistics": totals})


def figures_names() -> list[str]:
    return [
        "vcpus",
        "vcpus_used",
        "memory_mb",
        "memory_mb_used",
        "free_ram_mb",
        "local_gb",
        "local_gb_used",
        "free_disk_gb",
        "disk_available_least",
        "current_workload",
        "running_vms",
    ]
