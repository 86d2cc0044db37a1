"""Corral's rows as Nova's JSON: links, a flavor, a server (its status from the VM's and its
start history, its addresses, ``hostId``, a fault, the fields of the request's microversion, an
admin's extra fields), a server group, a key pair and a hypervisor (a host's figures counted as
the scheduler counts them)."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC

from hosts.driver.uris import host_name, is_local
from hosts.guests.ssh import reachable_address
from hosts.models import Host, HostStatus, JobState, VirtualMachine, VmStatus
from openstack.compute.base import NovaView
from openstack.compute.queries import Flavor, ServerGroup, StartHistory, template_flavor_id
from openstack.identity.catalog import base_url
from openstack.models import Server
from project.models import SshKey

# Corral's status -> Nova's (status, vm_state, task_state, power_state).
STATES = {
    VmStatus.UP: ("ACTIVE", "active", None, 1),
    VmStatus.PAUSED: ("PAUSED", "paused", None, 3),
    VmStatus.DOWN: ("SHUTOFF", "stopped", None, 4),
    VmStatus.STARTING: ("SHUTOFF", "stopped", "powering-on", 4),
    VmStatus.STOPPING: ("ACTIVE", "active", "powering-off", 1),
    VmStatus.SUSPENDING: ("ACTIVE", "active", "pausing", 1),
    VmStatus.RESUMING: ("PAUSED", "paused", "unpausing", 3),
    VmStatus.MIGRATING: ("MIGRATING", "active", "migrating", 1),
    VmStatus.UNKNOWN: ("UNKNOWN", "error", None, 0),
}
BUILDING = ("BUILD", "building", "spawning", 0)
ERROR = ("ERROR", "error", None, 0)


def links(request, kind: str, ident: str) -> list[dict]:
    base = base_url(request)
    return [
        {"rel": "self", "href": f"{base}/compute/v2.1/{kind}/{ident}"},
        {"rel": "bookmark", "href": f"{base}/compute/{kind}/{ident}"},
    ]


def flavor_view(request, flavor: Flavor, detail: bool = True) -> dict:
    summary = {"id": flavor.id, "name": flavor.name, "links": links(request, "flavors", flavor.id)}
    if not detail:
        return summary
    return {
        **summary,
        "vcpus": flavor.vcpus,
        "ram": flavor.ram,
        "disk": flavor.disk,
        "swap": "",
        "rxtx_factor": 1.0,
        "OS-FLV-EXT-DATA:ephemeral": 0,
        "OS-FLV-DISABLED:disabled": False,
        "os-flavor-access:is_public": flavor.is_public,
    }


def nova_time(moment) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def vm_state(vm: VirtualMachine) -> str:
    """Nova's ``vm_state`` of the VM's status (what Nova's 409s name)."""
    return STATES.get(vm.status, STATES[VmStatus.UNKNOWN])[1]


def status_of(vm: VirtualMachine, record: Server | None, history: StartHistory):
    """(status, vm_state, task_state, power_state, fault) of the VM as Nova shows it."""
    built_by_nova = record is not None and not record.from_pool
    if built_by_nova and not history.started and vm.status in (VmStatus.DOWN, VmStatus.STARTING):
        if history.last_state in (JobState.FAILED, JobState.CANCELLED):
            fault = {
                "code": 500,
                "message": history.last_error or "The server's first start did not finish.",
                "created": nova_time(history.last_finished_at),
            }
            return (*ERROR, fault)
        return (*BUILDING, None)
    return (*STATES.get(vm.status, STATES[VmStatus.UNKNOWN]), None)


def addresses_of(vm: VirtualMachine) -> dict:
    """Nova's ``addresses``: the VM's network with the addresses its guest shows, none until it
    shows one (as Nova names a server's network before its port has an address). An ACTIVE
    server without a network is one openstacksdk's ``create_server(wait=True)`` deletes."""
    template = vm.template
    network = (template.networks or [None])[0] or template.bridge or "default"
    found = []
    for address in guest_addresses(vm):
        found.append(
            {
                "version": 6 if ":" in address else 4,
                "addr": address,
                "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": "",
            }
        )
    return {str(network): found}


def guest_addresses(vm: VirtualMachine) -> list[str]:
    return [str(text).split("/")[0] for text in vm.ip_addresses or []]


def access_addresses(vm: VirtualMachine) -> tuple[str, str]:
    """Nova's ``accessIPv4`` and ``accessIPv6``, which a provider may set: where a guest on a
    libvirt network or a bridge is reached, its first such address of each version ("" for a
    user-mode NIC, whose address leads nowhere). openstacksdk takes ``accessIPv4`` for the
    server's public address, so it asks for no floating IP, which Corral does not have."""
    if not (vm.template.networks or vm.template.bridge):
        return "", ""
    addresses = guest_addresses(vm)
    v4 = reachable_address([address for address in addresses if ":" not in address])
    v6 = reachable_address([address for address in addresses if ":" in address])
    return v4 or "", v6 or ""


def host_id(vm, owner_id) -> str:
    """Nova's ``hostId``: the host hashed with the project, so a project sees which of its
    servers share a host and learns nothing else."""
    if vm is None or vm.host_id is None:
        return ""
    return hashlib.sha224(f"{owner_id}{vm.host_id}".encode()).hexdigest()


def server_body(
    view: NovaView,
    vm: VirtualMachine | None,
    record: Server | None,
    history: StartHistory | None,
    *,
    admin: bool,
    detail: bool = True,
) -> dict:
    """A server as Nova shows it to ``view``'s caller, in ``view``'s microversion: a VM (with
    its server row, if any, and its start history), or a server row that never became one."""
    request = view.request
    ident = str(vm.uuid) if vm is not None else str(record.pk)
    name = record.name if record is not None else vm.name
    summary = {"id": ident, "name": name, "links": links(request, "servers", ident)}
    if not detail:
        return summary
    if vm is not None:
        status_, vm_state_, task_state, power, fault = status_of(vm, record, history)
        if history.deleting:
            task_state = "deleting"
        elif history.imaging:
            task_state = "image_snapshot"  # Nova's, while createImage copies the disk
        owner_id = vm.owner_id
        flavor_id = record.flavor_id if record is not None else template_flavor_id(vm.template)
        image = vm.disk_image or vm.template.disk_image
        image_id = record.image_id if record is not None else (str(image.uuid) if image else "")
        created, updated = vm.created_at, vm.updated_at
        zone = vm.cluster.name
        addresses = addresses_of(vm)
        access_v4, access_v6 = access_addresses(vm)
    else:
        status_, vm_state_, task_state, power = ERROR
        fault = {
            "code": record.fault_code or 500,
            "message": record.fault_message,
            "created": nova_time(record.fault_at),
        }
        owner_id, flavor_id, image_id = record.owner_id, record.flavor_id, record.image_id
        created, updated, zone, addresses = (
            record.created_at,
            record.updated_at,
            record.availability_zone,
            {},
        )
        access_v4, access_v6 = "", ""
    body = {
        **summary,
        "status": status_,
        "tenant_id": str(owner_id or ""),
        "user_id": str(owner_id or ""),
        "metadata": record.metadata if record is not None else {},
        "hostId": host_id(vm, owner_id),
        "image": {"id": image_id, "links": links(request, "images", image_id)} if image_id else "",
        "flavor": {"id": flavor_id, "links": links(request, "flavors", flavor_id)},
        "created": nova_time(created),
        "updated": nova_time(updated),
        "addresses": addresses,
        "accessIPv4": access_v4,
        "accessIPv6": access_v6,
        "OS-DCF:diskConfig": "MANUAL",
        "progress": 100 if status_ == "ACTIVE" else 0,
        "OS-EXT-AZ:availability_zone": zone,
        "config_drive": "True" if record is not None and record.config_drive else "",
        "key_name": (record.key_name or None) if record is not None else None,
        "OS-SRV-USG:launched_at": nova_time(created) if status_ != "BUILD" else None,
        "OS-SRV-USG:terminated_at": None,
        "OS-EXT-STS:task_state": task_state,
        "OS-EXT-STS:vm_state": vm_state_,
        "OS-EXT-STS:power_state": power,
        "os-extended-volumes:volumes_attached": [],
    }
    if fault is not None:
        body["fault"] = fault
    if admin:
        host = vm.host.name if vm is not None and vm.host is not None else None
        body["OS-EXT-SRV-ATTR:host"] = host
        body["OS-EXT-SRV-ATTR:hypervisor_hostname"] = host
        body["OS-EXT-SRV-ATTR:instance_name"] = vm.domain if vm is not None else ""
    if view.at_least(2, 9):
        body["locked"] = False
    if view.at_least(2, 16):
        body["host_status"] = "UP" if vm is not None and vm.host is not None else ""
    if view.at_least(2, 19):
        body["description"] = record.description if record is not None else vm.description
    if view.at_least(2, 26):
        body["tags"] = []
    return body


def server_group_body(view: NovaView, group: ServerGroup) -> dict:
    body = {
        "id": group.id,
        "name": group.name,
        "policies": [group.policy],
        "members": group.members,
        "metadata": {},
    }
    if view.at_least(2, 13):
        body |= {"project_id": group.project_id, "user_id": group.user_id}
    return body


def nova_fingerprint(public_key: str) -> str:
    """Nova's fingerprint of an OpenSSH public key line: MD5 of its data, colon-separated."""
    digest = hashlib.md5(base64.b64decode(public_key.split()[1]), usedforsecurity=False)
    raw = digest.hexdigest()
    return ":".join(raw[i : i + 2] for i in range(0, len(raw), 2))


def keypair_body(view: NovaView, key: SshKey, *, detail: bool) -> dict:
    body = {
        "name": key.name,
        "public_key": key.public_key,
        "fingerprint": nova_fingerprint(key.public_key),
    }
    if view.at_least(2, 2):
        body["type"] = "ssh"
    if detail:
        body |= {
            "user_id": str(key.owner_id),
            "id": key.pk,
            "created_at": key.created_at.strftime("%Y-%m-%dT%H:%M:%S.%f"),
            "updated_at": None,
            "deleted": False,
            "deleted_at": None,
        }
    return body


GIB = 1024**3
ALIVE = (HostStatus.UP, HostStatus.MAINTENANCE)


def _gib(value: int | None) -> int:
    return (value or 0) // GIB


def hypervisor_summary(host: Host) -> dict:
    return {
        "id": host.pk,
        "hypervisor_hostname": host.name,
        "state": "up" if host.status in ALIVE else "down",
        "status": "disabled" if host.status == HostStatus.MAINTENANCE else "enabled",
    }


def hypervisor_figures(host: Host) -> dict:
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


def hypervisor_detail(view: NovaView, host: Host) -> dict:
    maintenance = host.status == HostStatus.MAINTENANCE
    return {
        **hypervisor_summary(host),
        "hypervisor_type": "QEMU",
        "hypervisor_version": 0,
        "host_ip": None if is_local(host.uri) else host_name(host.uri),
        "service": {
            "host": host.name,
            "id": host.pk,
            "disabled_reason": (host.status_detail or "maintenance") if maintenance else None,
        },
        **hypervisor_figures(host),
        "cpu_info": {} if view.at_least(2, 28) else "{}",
    }


def hypervisor_figure_names() -> list[str]:
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
