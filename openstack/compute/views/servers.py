"""Servers: Corral's VMs as Nova's servers, and what Nova's API does to them (HTTP only).

A server is a VM the caller may see (its id the VM's UUID); the name, metadata and choices
given to Nova live beside it (``openstack.models.Server``). Creating one: compute/launch.py;
acting on one: server_actions.py; how one shows: compute/presenters.py (statuses from the VM's,
faults from a first start that failed); what Nova keeps of one, and deleting it:
compute/services.py.
"""

from __future__ import annotations

import re
import uuid
from functools import cached_property
from urllib.parse import urlencode

from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from hosts.guests import consoles
from hosts.models import VirtualMachine
from openstack.compute import services
from openstack.compute.base import Conflict, NovaView, is_admin, missing, policy_refused
from openstack.compute.bodies import ServerRequest, check_metadata
from openstack.compute.launch import launch
from openstack.compute.presenters import addresses_of, links, server_body
from openstack.compute.queries import (
    StartHistory,
    record_of,
    start_histories,
    start_history,
    visible_vms,
)
from openstack.identity.catalog import base_url
from openstack.models import Server
from project.access.permissions import holds
from project.errors import Refused

OPERATE = services.OPERATE


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

    def view(self, vm, record, history: StartHistory | None) -> dict:
        return server_body(self, vm, record, history, admin=self.admin)


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
        return Response({"server": self.view(vm, record, start_history(vm))})

    def put(self, request, server_id: str):
        body = self.body("server")
        vm, record = self.vm_or_record(server_id)
        record = services.update_server(
            request.user, vm, record, body, description=self.at_least(2, 19)
        )
        return Response({"server": self.view(vm, record, start_history(vm))})

    def delete(self, request, server_id: str):
        vm, record = self.vm_or_record(server_id)
        services.delete_server(request.user, vm, record)
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


class ServerSecurityGroupsView(ServerViews):
    """``GET /servers/{id}/os-security-groups``: none. Corral has no network service whose
    groups filter a guest's traffic; what reaches a guest is its network's and its host's
    business. Nova answers so for a server in no group (a tool that reconciles a server's
    groups, Ansible's ``server`` module, then finds nothing to change)."""

    def get(self, request, server_id: str):
        self.vm_or_record(server_id)  # a 404 for a server the caller may not see
        return Response({"security_groups": []})


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
        record = services.write_metadata(vm, record, given, replace=replace)
        return Response({"metadata": record.metadata})

    def changeable(self, server_id: str):
        vm, record = self.vm_or_record(server_id)
        services.check_changeable(self.request.user, server_id, vm)
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
        services.write_metadata(vm, record, meta, replace=False)
        return Response({"meta": meta})

    def delete(self, request, server_id: str, key: str):
        vm, record = self.changeable(server_id)
        if record is None or key not in record.metadata:
            raise missing("Metadata item was not found")
        services.delete_metadata_item(record, key)
        return Response(status=status.HTTP_204_NO_CONTENT)
