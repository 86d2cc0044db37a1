"""Servers: Corral's VMs as Nova's servers, and what Nova's API does to them.

A server is a VM the caller may see (its id the VM's UUID); the name, metadata and choices
given to Nova live beside it (``openstack.models.Server``). Creating one: launch.py; acting on
one: server_actions.py. Statuses come from the VM's (``status_of``), faults from a first start
that failed.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import UTC
from functools import cached_property
from urllib.parse import urlencode

from django.db import transaction
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from hosts import services as vm_services
from hosts.guests import consoles
from hosts.models import (
    Job,
    JobKind,
    JobState,
    VirtualMachine,
    VmStatus,
)
from hosts.models.jobs import ACTIVE_JOB_STATES
from openstack.compute import flavors as flavor_lookup
from openstack.compute.base import Conflict, NovaView, missing, policy_refused
from openstack.compute.flavors import is_admin, links
from openstack.compute.launch import ServerRequest, check_metadata, launch, server_name
from openstack.identity.catalog import base_url
from openstack.models import Server
from pools import services as pool_services
from project.errors import Refused
from project.permissions import holds, restrict

VIEW = "hosts.view_virtualmachine"
OPERATE = "hosts.operate_virtualmachine"
DELETE = "hosts.delete_virtualmachine"

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


def nova_time(moment) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class StartHistory:
    """What a VM's start jobs say: whether one ever succeeded, the last one, and whether a
    deletion is queued."""

    started: bool = False
    last_state: str = ""
    last_error: str = ""
    last_finished_at: object = None
    deleting: bool = False


def start_histories(vm_ids: list[int]) -> dict[int, StartHistory]:
    """The start history of each VM, in one query."""
    histories = {vm_id: StartHistory() for vm_id in vm_ids}
    if not vm_ids:
        return histories
    rows = (
        Job.objects.filter(vm_id__in=vm_ids, kind__in=[JobKind.START, JobKind.DELETE])
        .order_by("id")
        .values_list("vm_id", "kind", "state", "error_message", "finished_at")
    )
    for vm_id, kind, state, error, finished_at in rows:
        history = histories[vm_id]
        if kind == JobKind.DELETE:
            history.deleting = history.deleting or state in ACTIVE_JOB_STATES
            continue
        history.started = history.started or state == JobState.SUCCEEDED
        history.last_state, history.last_error = state, error
        history.last_finished_at = finished_at
    return histories


def record_of(vm: VirtualMachine) -> Server | None:
    """The server row that speaks for the VM: its holder's (a pool's VM handed to another user
    since, or returned, is named afresh)."""
    record = getattr(vm, "server", None) if hasattr(vm, "server") else None
    if record is not None and record.owner_id != vm.owner_id:
        return None
    return record


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
    template = vm.template
    network = (template.networks or [None])[0] or template.bridge or "default"
    found = []
    for text in vm.ip_addresses or []:
        address = str(text).split("/")[0]
        found.append(
            {
                "version": 6 if ":" in address else 4,
                "addr": address,
                "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": "",
            }
        )
    return {str(network): found} if found else {}


def visible_vms(user):
    return restrict(
        VirtualMachine.objects.select_related(
            "template__disk_image",
            "disk_image",
            "host",
            "cluster",
            "owner",
            "server",
            "reservation",
        ),
        user,
        VIEW,
    )


def name_pattern(text: str) -> re.Pattern:
    """Nova's ``name`` filter, a regular expression, as its linear part: a substring with ``^``
    and ``$`` anchors and ``.`` for any character; every other character stands for itself (a
    caller's expression never backtracks)."""
    start, end = text.startswith("^"), text.endswith("$") and len(text) > 1
    core = text[1 if start else 0 : len(text) - 1 if end else len(text)]
    body = ".".join(re.escape(part) for part in core.split("."))
    return re.compile(("^" if start else "") + body + ("$" if end else ""))


class ServerViews(NovaView):
    """What the server views share: finding a server and showing it for the version asked."""

    @cached_property
    def admin(self) -> bool:
        return is_admin(self.request.user)

    def vm_or_record(self, server_id: str) -> tuple[VirtualMachine | None, Server | None]:
        """The visible VM with this id, or the caller's server that never became one."""
        try:
            ident = uuid.UUID(server_id)
        except ValueError:
            raise missing(f"Instance {server_id} could not be found.") from None
        vm = visible_vms(self.request.user).filter(uuid=ident).first()
        if vm is not None:
            return vm, record_of(vm)
        record = Server.objects.filter(pk=ident, vm__isnull=True).first()
        if record is not None and (record.owner_id == self.request.user.pk or self.admin):
            return None, record
        raise missing(f"Instance {server_id} could not be found.")

    def view(self, vm, record, history: StartHistory | None, detail: bool = True) -> dict:
        request = self.request
        ident = str(vm.uuid) if vm is not None else str(record.pk)
        name = record.name if record is not None else vm.name
        summary = {"id": ident, "name": name, "links": links(request, "servers", ident)}
        if not detail:
            return summary
        if vm is not None:
            status_, vm_state, task_state, power, fault = status_of(vm, record, history)
            if history.deleting:
                task_state = "deleting"
            owner_id = vm.owner_id
            flavor_id = (
                record.flavor_id
                if record is not None
                else flavor_lookup.template_flavor_id(vm.template)
            )
            image = vm.disk_image or vm.template.disk_image
            image_id = record.image_id if record is not None else (str(image.uuid) if image else "")
            created, updated = vm.created_at, vm.updated_at
            zone = vm.cluster.name
            addresses = addresses_of(vm)
        else:
            status_, vm_state, task_state, power = ERROR
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
        body = {
            **summary,
            "status": status_,
            "tenant_id": str(owner_id or ""),
            "user_id": str(owner_id or ""),
            "metadata": record.metadata if record is not None else {},
            "hostId": self.host_id(vm, owner_id),
            "image": {"id": image_id, "links": links(request, "images", image_id)}
            if image_id
            else "",
            "flavor": {"id": flavor_id, "links": links(request, "flavors", flavor_id)},
            "created": nova_time(created),
            "updated": nova_time(updated),
            "addresses": addresses,
            "accessIPv4": "",
            "accessIPv6": "",
            "OS-DCF:diskConfig": "MANUAL",
            "progress": 100 if status_ == "ACTIVE" else 0,
            "OS-EXT-AZ:availability_zone": zone,
            "config_drive": "True" if record is not None and record.config_drive else "",
            "key_name": (record.key_name or None) if record is not None else None,
            "OS-SRV-USG:launched_at": nova_time(created) if status_ != "BUILD" else None,
            "OS-SRV-USG:terminated_at": None,
            "OS-EXT-STS:task_state": task_state,
            "OS-EXT-STS:vm_state": vm_state,
            "OS-EXT-STS:power_state": power,
            "os-extended-volumes:volumes_attached": [],
        }
        if status_ != "ERROR":
            body["security_groups"] = [{"name": "default"}]
        if fault is not None:
            body["fault"] = fault
        if self.admin:
            host = vm.host.name if vm is not None and vm.host is not None else None
            body["OS-EXT-SRV-ATTR:host"] = host
            body["OS-EXT-SRV-ATTR:hypervisor_hostname"] = host
            body["OS-EXT-SRV-ATTR:instance_name"] = vm.domain if vm is not None else ""
        if self.at_least(2, 9):
            body["locked"] = False
        if self.at_least(2, 16):
            body["host_status"] = "UP" if vm is not None and vm.host is not None else ""
        if self.at_least(2, 19):
            body["description"] = record.description if record is not None else vm.description
        if self.at_least(2, 26):
            body["tags"] = []
        return body

    def own_record(self, vm, record: Server | None) -> Server:
        """The server row of a VM, made now for one made outside Nova's API (named after the
        VM) when something Nova keeps is about to change."""
        if record is not None:
            return record
        Server.objects.filter(vm=vm).delete()  # a former holder's
        return Server.objects.create(
            id=vm.uuid,
            vm=vm,
            owner_id=vm.owner_id,
            name=vm.name,
            flavor_id=flavor_lookup.template_flavor_id(vm.template),
            from_pool=vm.pool_id is not None,
        )

    @staticmethod
    def host_id(vm, owner_id) -> str:
        """Nova's ``hostId``: the host hashed with the project, so a project sees which of its
        servers share a host and learns nothing else."""
        if vm is None or vm.host_id is None:
            return ""
        return hashlib.sha224(f"{owner_id}{vm.host_id}".encode()).hexdigest()


class ServersView(ServerViews):
    """``/servers`` (and ``/servers/detail``): list, create."""

    detail = False

    def get(self, request):
        query = request.query_params
        all_tenants = query.get("all_tenants", "").lower() in ("1", "true", "yes", "t", "")
        all_tenants = "all_tenants" in query and all_tenants
        if all_tenants and not self.admin:
            raise policy_refused("os_compute_api:servers:index:get_all_tenants")
        vms = visible_vms(request.user).order_by("-created_at", "-id")
        failed = Server.objects.filter(vm__isnull=True).order_by("-created_at")
        if not all_tenants:
            vms, failed = vms.filter(owner=request.user), failed.filter(owner=request.user)
        vms, failed = list(vms), list(failed)
        histories = start_histories([vm.pk for vm in vms])
        rows = [(vm, record_of(vm), histories[vm.pk]) for vm in vms]
        rows += [(None, record, None) for record in failed]
        bodies = [self.view(vm, record, history) for vm, record, history in rows]
        bodies = self.filtered(bodies, query)
        if not self.detail:
            bodies = [{key: body[key] for key in ("id", "name", "links")} for body in bodies]
        return Response({"servers": bodies})

    def filtered(self, bodies: list[dict], query) -> list[dict]:
        name = query.get("name")
        if name:
            pattern = name_pattern(name)
            bodies = [body for body in bodies if pattern.search(body["name"])]
        wanted = query.get("status")
        if wanted:
            bodies = [body for body in bodies if body["status"] == wanted.upper()]
        flavor = query.get("flavor")
        if flavor:
            bodies = [body for body in bodies if body["flavor"]["id"] == flavor]
        image = query.get("image")
        if image:
            bodies = [body for body in bodies if body["image"] and body["image"]["id"] == image]
        marker = query.get("marker")
        if marker:
            ids = [body["id"] for body in bodies]
            if marker not in ids:
                raise ValidationError({"marker": f"marker [{marker}] not found"})
            bodies = bodies[ids.index(marker) + 1 :]
        limit = query.get("limit")
        if limit:
            if not limit.isdigit():
                raise ValidationError({"limit": "Invalid value: a whole number is needed."})
            bodies = bodies[: int(limit)]
        return bodies

    def post(self, request):
        spec = ServerRequest(self, request.user).read(self.body("server"))
        made = launch(spec, request.user)
        first = made[0]
        response = {
            "server": {
                "id": str(first.pk),
                "links": links(request, "servers", str(first.pk)),
                "OS-DCF:diskConfig": "MANUAL",
                "security_groups": [{"name": "default"}],
            }
        }
        if spec.return_reservation_id:
            response = {"reservation_id": first.reservation_id}
        return Response(response, status=status.HTTP_202_ACCEPTED)


class ServersDetailView(ServersView):
    detail = True

    def post(self, request):
        return self.http_method_not_allowed(request)


class ServerView(ServerViews):
    """``/servers/{id}``: show, update (name, description), delete."""

    def get(self, request, server_id: str):
        vm, record = self.vm_or_record(server_id)
        history = start_histories([vm.pk])[vm.pk] if vm is not None else None
        return Response({"server": self.view(vm, record, history)})

    def put(self, request, server_id: str):
        body = self.body("server")
        vm, record = self.vm_or_record(server_id)
        if vm is not None and not holds(request.user, "hosts.change_virtualmachine", vm):
            raise policy_refused("os_compute_api:servers:update")
        changes = {}
        if "name" in body:
            changes["name"] = server_name(body["name"])
        if "description" in body and self.at_least(2, 19):
            changes["description"] = body["description"]
        with transaction.atomic():
            record = self.own_record(vm, record)
            for key, value in changes.items():
                setattr(record, key, value)
            record.save()
        history = start_histories([vm.pk])[vm.pk] if vm is not None else None
        return Response({"server": self.view(vm, record, history)})

    def delete(self, request, server_id: str):
        vm, record = self.vm_or_record(server_id)
        if vm is None:
            record.delete()
            return Response(status=status.HTTP_204_NO_CONTENT)
        with transaction.atomic():
            if vm.pool_id is not None and vm.owner_id == request.user.pk:
                # A pool's VM goes back to its pool: the server is gone for its user.
                Server.objects.filter(vm=vm).delete()
                pool_services.return_vm(vm, requested_by=request.user)
                return Response(status=status.HTTP_204_NO_CONTENT)
            if not holds(request.user, DELETE, vm):
                raise policy_refused("os_compute_api:servers:delete")
            if vm.pool_id is not None:
                raise Conflict(
                    f"Server {vm.uuid} belongs to pool {vm.pool.name}; remove it from the pool "
                    "in Corral first."
                )
            vm_services.destroy_vm(vm, requested_by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


def console_url(request, vm: VirtualMachine) -> str:
    """The address of Corral's noVNC page with a one-time ticket for the caller (404 to who
    may not operate the server; 409 while it shows no screen)."""
    if not holds(request.user, OPERATE, vm):
        raise missing(f"Instance {vm.uuid} could not be found.")
    try:
        ticket, _ = consoles.issue_ticket(vm, request.user)
    except Refused as refused:
        raise Conflict(refused.message) from None
    return f"{base_url(request)}/console/?{urlencode({'token': ticket})}"


class RemoteConsolesView(ServerViews):
    """``POST /servers/{id}/remote-consoles`` (2.6): ``{"remote_console": {"protocol": "vnc",
    "type": "novnc"}}``."""

    def post(self, request, server_id: str):
        if not self.at_least(2, 6):
            raise missing("The resource could not be found.")
        body = self.body("remote_console")
        if body.get("protocol") != "vnc" or body.get("type") != "novnc":
            raise ValidationError(
                {"remote_console": "Corral's screens open in noVNC: protocol 'vnc', type 'novnc'."}
            )
        vm, _ = self.vm_or_record(server_id)
        if vm is None:
            raise Conflict(f"Instance {server_id} has no console: it is in vm_state error.")
        url = console_url(request, vm)
        return Response({"remote_console": {"protocol": "vnc", "type": "novnc", "url": url}})


class ServerIpsView(ServerViews):
    """``GET /servers/{id}/ips``: the server's addresses by network."""

    def get(self, request, server_id: str):
        vm, _ = self.vm_or_record(server_id)
        return Response({"addresses": addresses_of(vm) if vm is not None else {}})


class ServerMetadataView(ServerViews):
    """``/servers/{id}/metadata``: read, merge in (POST) or replace (PUT) the server's
    metadata."""

    def get(self, request, server_id: str):
        _, record = self.vm_or_record(server_id)
        return Response({"metadata": record.metadata if record is not None else {}})

    def post(self, request, server_id: str):
        return self.write(server_id, replace=False)

    def put(self, request, server_id: str):
        return self.write(server_id, replace=True)

    def write(self, server_id: str, replace: bool) -> Response:
        given = check_metadata(self.body("metadata"))
        vm, record = self.changeable(server_id)
        with transaction.atomic():
            record = self.own_record(vm, record)
            merged = given if replace else {**record.metadata, **given}
            record.metadata = check_metadata(merged)
            record.save(update_fields=["metadata", "updated_at"])
        return Response({"metadata": record.metadata})

    def changeable(self, server_id: str):
        vm, record = self.vm_or_record(server_id)
        if vm is None:
            raise Conflict(f"Instance {server_id} is in vm_state error; delete it.")
        if not holds(self.request.user, "hosts.change_virtualmachine", vm):
            raise policy_refused("os_compute_api:server-metadata:update")
        return vm, record


class ServerMetadataItemView(ServerMetadataView):
    """``/servers/{id}/metadata/{key}``: one item, read, set (PUT ``{"meta": {key: value}}``)
    or deleted."""

    def get(self, request, server_id: str, key: str):
        _, record = self.vm_or_record(server_id)
        metadata = record.metadata if record is not None else {}
        if key not in metadata:
            raise missing("Metadata item was not found")
        return Response({"meta": {key: metadata[key]}})

    def put(self, request, server_id: str, key: str):
        meta = check_metadata(self.body("meta"), "meta")
        if list(meta) != [key]:
            raise ValidationError({"meta": "Request body and URI mismatch"})
        vm, record = self.changeable(server_id)
        with transaction.atomic():
            record = self.own_record(vm, record)
            record.metadata = check_metadata({**record.metadata, **meta})
            record.save(update_fields=["metadata", "updated_at"])
        return Response({"meta": meta})

    def delete(self, request, server_id: str, key: str):
        vm, record = self.changeable(server_id)
        if record is None or key not in record.metadata:
            raise missing("Metadata item was not found")
        record.metadata = {k: v for k, v in record.metadata.items() if k != key}
        record.save(update_fields=["metadata", "updated_at"])
        return Response(status=status.HTTP_204_NO_CONTENT)
