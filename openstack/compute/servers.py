"""Servers: Corral's VMs as Nova's servers, and what Nova's API does to them.

A server is a VM the caller may see (its id the VM's UUID); the name, metadata and choices
given to Nova live beside it (``openstack.models.Server``). Creating one goes through Corral's
own use cases: a pool's prestarted VM when the caller may take from a pool of the flavor's
template and image (ACTIVE at once, the caller's keys pushed into the running guest), else a
new VM validated as Corral's API validates one (the rules of reservations included) and
started. What Corral refuses for want of capacity (a reservation full, or not active) Nova's
scheduler would refuse too: the server is accepted and goes to ERROR with the reason as its
fault. Statuses come from the VM's (``status_of``), faults from a first start that failed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import UTC
from functools import cached_property
from urllib.parse import urlencode

from django.db import transaction
from django.utils import timezone
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from hosts import services as vm_services
from hosts.api.serializers import VirtualMachineSerializer
from hosts.guests import consoles
from hosts.models import (
    Cluster,
    ConsoleLog,
    Image,
    Job,
    JobKind,
    JobState,
    VirtualMachine,
    VmStatus,
)
from hosts.models.jobs import ACTIVE_JOB_STATES
from openstack.compute import flavors as flavor_lookup
from openstack.compute.base import Conflict, NovaView, missing
from openstack.compute.flavors import Flavor, find_flavor, is_admin, links
from openstack.compute.server_groups import add_member, find_group
from openstack.identity.catalog import base_url
from openstack.image.images import ImageNotActive, ImageNotFound, find_image
from openstack.models import Server
from pools import services as pool_services
from pools.models import VmPool
from project.errors import Refused
from project.models import SshKey
from project.permissions import holds, restrict

VIEW = "hosts.view_virtualmachine"
OPERATE = "hosts.operate_virtualmachine"
DELETE = "hosts.delete_virtualmachine"
MAX_METADATA = 128
MAX_USER_DATA = 65535  # Nova's limit on the base64 text

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
            raise PermissionDenied(
                "Policy doesn't allow os_compute_api:servers:index:get_all_tenants to be performed."
            )
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
            try:
                pattern = re.compile(name)
            except re.error:
                raise ValidationError({"name": f"Invalid regular expression {name!r}."}) from None
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
            raise PermissionDenied(
                "Policy doesn't allow os_compute_api:servers:update to be performed."
            )
        changes = {}
        if "name" in body:
            changes["name"] = server_name(body["name"])
        if "description" in body and self.at_least(2, 19):
            changes["description"] = body["description"]
        with transaction.atomic():
            if record is None:
                record = Server.objects.create(
                    id=vm.uuid,
                    vm=vm,
                    owner_id=vm.owner_id or request.user.pk,
                    name=vm.name,
                    flavor_id=flavor_lookup.template_flavor_id(vm.template),
                    from_pool=vm.pool_id is not None,
                )
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
                raise PermissionDenied(
                    "Policy doesn't allow os_compute_api:servers:delete to be performed."
                )
            if vm.pool_id is not None:
                raise Conflict(
                    f"Server {vm.uuid} belongs to pool {vm.pool.name}; remove it from the pool "
                    "in Corral first."
                )
            vm_services.destroy_vm(vm, requested_by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


def policy_message(rule: str) -> str:
    return f"Policy doesn't allow os_compute_api:{rule} to be performed."


def server_name(value) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise ValidationError({"name": "A name of 1 to 255 characters, not only spaces."})
    return value


@dataclass
class LaunchSpec:
    name: str
    flavor: Flavor
    image: Image | None
    image_ref: str
    key_name: str
    user_data: str
    metadata: dict
    count: int
    min_count: int
    cluster: Cluster | None
    zone: str
    config_drive: bool
    description: str | None
    group: object
    return_reservation_id: bool
    request: object


class ServerRequest:
    """A ``POST /servers`` body read and checked, field by field (Nova's 400s)."""

    def __init__(self, view: NovaView, user) -> None:
        self.view, self.user = view, user

    def read(self, body: dict) -> LaunchSpec:
        name = server_name(body.get("name"))
        if "flavorRef" not in body:
            raise ValidationError({"flavorRef": "'flavorRef' is a required property."})
        flavor = find_flavor(self.user, body["flavorRef"])
        if flavor is None:
            raise ValidationError(
                {
                    "flavorRef": f"Flavor {flavor_lookup.reference(body['flavorRef'])} "
                    "could not be found."
                }
            )
        image_ref = flavor_lookup.reference(body.get("imageRef") or "")
        image = self.image(image_ref) if image_ref else None
        networks = body.get("networks")
        if self.view.at_least(2, 37) and networks is None:
            raise ValidationError({"networks": "'networks' is a required property."})
        if (
            networks is not None
            and networks not in ("auto", "none")
            and not isinstance(networks, list)
        ):
            raise ValidationError({"networks": "'auto', 'none' or a list of networks."})
        return LaunchSpec(
            name=name,
            flavor=flavor,
            image=image,
            image_ref=image_ref,
            key_name=self.key_name(body.get("key_name")),
            user_data=self.user_data(body.get("user_data")),
            metadata=self.metadata(body.get("metadata")),
            count=self.count(body, "max_count", 1),
            min_count=self.count(body, "min_count", 1),
            cluster=self.zone(body.get("availability_zone")),
            zone=body.get("availability_zone") or "",
            config_drive=body.get("config_drive") in (True, "true", "True", "1", 1),
            description=body.get("description"),
            group=self.group(self.view.request.data.get("os:scheduler_hints")),
            return_reservation_id=body.get("return_reservation_id") in (True, "true", "True"),
            request=self.view.request,
        )

    def image(self, ref: str) -> Image:
        try:
            found = find_image(self.user, ref)
        except ImageNotActive:
            raise ValidationError({"imageRef": f"Image {ref} is not active."}) from None
        except ImageNotFound:
            raise ValidationError({"imageRef": f"Image {ref} could not be found."}) from None
        if found.kind != "disk":
            raise ValidationError({"imageRef": f"Image {ref} is not a disk image."})
        return found

    def key_name(self, value) -> str:
        if value in (None, ""):
            return ""
        if (
            not isinstance(value, str)
            or not SshKey.objects.filter(owner=self.user, name=value).exists()
        ):
            raise ValidationError({"key_name": "Invalid key_name provided."})
        return value

    def user_data(self, value) -> str:
        if value in (None, ""):
            return ""
        if not isinstance(value, str) or len(value) > MAX_USER_DATA:
            raise ValidationError(
                {"user_data": f"Base64 text of at most {MAX_USER_DATA} characters."}
            )
        try:
            text = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, ValueError):
            raise ValidationError(
                {"user_data": "User data needs to be valid base 64 (of UTF-8 text)."}
            ) from None
        return text

    def metadata(self, value) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValidationError({"metadata": "An object of string keys and values."})
        if len(value) > MAX_METADATA:
            raise ValidationError({"metadata": f"At most {MAX_METADATA} items (quota exceeded)."})
        for key, item in value.items():
            if not key or len(key) > 255 or not isinstance(item, str) or len(item) > 255:
                raise ValidationError(
                    {"metadata": f"Key {key!r}: keys and values are 1 to 255 characters."}
                )
        return value

    def count(self, body: dict, field: str, default: int) -> int:
        value = body.get(field, default)
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if number < 1 or number > 100:
            raise ValidationError({field: f"{value!r} is not a whole number from 1 to 100."})
        return number

    def zone(self, value) -> Cluster | None:
        if value in (None, ""):
            return None
        found = restrict(Cluster.objects.all(), self.user, "hosts.view_cluster").filter(
            name=str(value).split(":", 1)[0]
        )
        cluster = found.first()
        if cluster is None:
            raise ValidationError(
                {"availability_zone": f"The requested availability zone is not available: {value}"}
            )
        return cluster

    def group(self, hints):
        if hints is None:
            return None
        if not isinstance(hints, dict):
            raise ValidationError({"os:scheduler_hints": "An object of scheduler hints."})
        ref = hints.get("group")
        if ref in (None, ""):
            return None
        found = find_group(self.user, str(ref))
        if found is None:
            raise ValidationError({"group": f"Instance group {ref} could not be found."})
        return found


def vm_name(name: str, cluster_id: int | None, ident: uuid.UUID) -> str:
    """A VM name for a server's: its letters, digits, '.', '_' and '-', free in the cluster
    (else with part of the server's id after it)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:52] or "server"
    taken = VirtualMachine.objects.filter(cluster_id=cluster_id, name=base).exists()
    return f"{base}-{ident.hex[:8]}" if taken else base


def launch(spec: LaunchSpec, user) -> list[Server]:
    """Create the servers a request asks for (one unless ``max_count``)."""
    batch = uuid.uuid4().hex[:8]
    made = []
    for index in range(spec.count):
        name = spec.name if spec.count == 1 else f"{spec.name}-{index + 1}"
        made.append(launch_one(spec, user, name, index, f"r-{batch}"))
    return made


def launch_one(spec: LaunchSpec, user, name: str, index: int, reservation_id: str) -> Server:
    record = Server(
        owner=user,
        name=name,
        description=spec.description,
        flavor_id=spec.flavor.id,
        image_id=spec.image_ref,
        key_name=spec.key_name,
        metadata=spec.metadata,
        availability_zone=spec.zone,
        config_drive=spec.config_drive,
        reservation_id=reservation_id,
        launch_index=index,
    )
    vm = from_pool(spec, user)
    if vm is not None:
        Server.objects.filter(vm=vm).delete()
        record.id, record.vm, record.from_pool = vm.uuid, vm, True
        record.save(force_insert=True)
        return record
    try:
        with transaction.atomic():
            vm = new_vm(spec, user, name)
            record.id, record.vm = vm.uuid, vm
            record.save(force_insert=True)
            if spec.group is not None:
                add_member(spec.group, vm)
            vm_services.request_operation(vm, JobKind.START, requested_by=user)
    except NotLaunched as refused:
        record.id = uuid.uuid4()
        record.vm = None
        record.fault_code, record.fault_message = 500, refused.message
        record.fault_at = timezone.now()
        record.save(force_insert=True)
    return record


class NotLaunched(Exception):
    """Corral would not make the VM (no capacity, the reservation full or not active): the
    server goes to ERROR with this as its fault, as Nova's scheduler's refusals do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def from_pool(spec: LaunchSpec, user) -> VirtualMachine | None:
    """A pool's VM handed to the caller, when a pool of the flavor's template and image lets
    them take one (and nothing asked for needs a first boot: user-data, a server group)."""
    template = spec.flavor.template
    if template is None or spec.user_data or spec.group is not None:
        return None
    if spec.image is not None and spec.image.pk != template.disk_image_id:
        return None
    pools = restrict(VmPool.objects.filter(template=template), user, "pools.allocate_vmpool")
    if spec.cluster is not None:
        pools = pools.filter(cluster=spec.cluster)
    for pool in pools.order_by("name"):
        try:
            return pool_services.allocate_vm(pool, user).vm
        except (pool_services.PoolExhausted, pool_services.UserLimitReached):
            continue
    return None


def new_vm(spec: LaunchSpec, user, name: str) -> VirtualMachine:
    """A VM of the spec, validated as Corral's API validates one (its launch rules, those of
    reservations included), made by the caller."""
    flavor, reservation = spec.flavor, spec.flavor.reservation
    group_reservation = getattr(spec.group, "reservation", None)
    if group_reservation is not None and group_reservation != reservation:
        raise ValidationError(
            {
                "group": f"Server group {spec.group.id} is reservation "
                f"{group_reservation.pk}'s: boot with that reservation's flavor."
            }
        )
    template = flavor.template or launch_template(spec, user)
    cluster = spec.cluster or template.cluster
    if spec.group is not None and spec.group.affinity_group is not None:
        cluster = spec.group.affinity_group.cluster
    if cluster is None and reservation is None:
        cluster = (
            restrict(Cluster.objects.all(), user, "hosts.add_virtualmachine")
            .order_by("name")
            .first()
        )
    data = {
        "name": vm_name(name, getattr(cluster, "pk", None), uuid.uuid4()),
        "template": template.pk,
        "vcpus": flavor.vcpus,
        "memory_mb": flavor.ram,
    }
    if flavor.disk:
        data["disk_gb"] = flavor.disk
    if cluster is not None:
        data["cluster"] = cluster.pk
    if reservation is not None:
        data["reservation"] = reservation.pk
    serializer = VirtualMachineSerializer(data=data, context={"request": spec.request})
    try:
        serializer.is_valid(raise_exception=True)
    except serializers.ValidationError as invalid:
        raise NotLaunched("; ".join(flat_messages(invalid.detail))) from None
    vm = serializer.unsaved_instance()
    if spec.image is not None and spec.image.pk != template.disk_image_id:
        vm.disk_image = spec.image
    vm.user_data = spec.user_data
    if not holds(user, "hosts.add_virtualmachine", vm):
        raise PermissionDenied(
            f"You may not create servers in availability zone {vm.cluster.name}."
        )
    try:
        vm.full_clean()
    except Exception as invalid:  # a Django ValidationError: the disk too small for the image
        raise NotLaunched(
            "; ".join(flat_messages(getattr(invalid, "message_dict", {}) or str(invalid)))
        ) from None
    return vm_services.create_vm(vm, created_by=user)


def launch_template(spec: LaunchSpec, user):
    """The template a reservation's server boots from: one the caller may use in the
    reservation's cluster, the one of the image asked for first."""
    templates = flavor_lookup.usable_templates(user)
    clusters = set(
        spec.flavor.reservation.allocations.values_list("host__cluster_id", flat=True)
    ) - {None}
    templates = [t for t in templates.order_by("name") if t.cluster_id in clusters | {None}]
    if not templates:
        raise ValidationError(
            {"flavorRef": "No template you may use launches into this reservation's cluster."}
        )
    if spec.image is not None:
        for template in templates:
            if template.disk_image_id == spec.image.pk:
                return template
    return templates[0]


def flat_messages(detail) -> list[str]:
    if isinstance(detail, dict):
        return [m for key, value in detail.items() for m in flat_messages(value)]
    if isinstance(detail, list):
        return [m for item in detail for m in flat_messages(item)]
    return [str(detail)]


class ServerActionView(ServerViews):
    """``POST /servers/{id}/action``: ``os-start``, ``os-stop``, ``reboot``,
    ``os-getConsoleOutput`` (the serial log), ``os-getVNCConsole`` (the screen's URL)."""

    def post(self, request, server_id: str):
        data = request.data
        if not isinstance(data, dict) or len(data) != 1:
            raise ValidationError({"action": 'The body names one action, e.g. {"os-start": null}.'})
        ((action, argument),) = data.items()
        handler = ACTIONS.get(action)
        if handler is None:
            raise ValidationError({"action": f"There is no such action: {action}"})
        vm, _ = self.vm_or_record(server_id)
        if vm is None:
            raise Conflict(f"Cannot '{action}' instance {server_id} while it is in vm_state error")
        return handler(self, vm, argument)

    def operate(self, vm, kinds: list[str], action: str) -> Response:
        if not holds(self.request.user, OPERATE, vm):
            raise PermissionDenied(
                f"Policy doesn't allow os_compute_api:servers:{action} to be performed."
            )
        with transaction.atomic():
            try:
                for kind in kinds:
                    vm_services.request_operation(vm, kind, requested_by=self.request.user)
            except Refused as refused:
                raise Conflict(
                    f"Cannot '{action}' instance {vm.uuid} while it is in vm_state "
                    f"{STATES.get(vm.status, STATES[VmStatus.UNKNOWN])[1]}: {refused.message}"
                ) from None
        return Response(status=status.HTTP_202_ACCEPTED)

    def start(self, vm, argument):
        return self.operate(vm, [JobKind.START], "start")

    def stop(self, vm, argument):
        return self.operate(vm, [JobKind.POWEROFF], "stop")

    def reboot(self, vm, argument):
        kind = (argument or {}).get("type") if isinstance(argument, dict) else None
        if kind not in ("SOFT", "HARD"):
            raise ValidationError({"reboot.type": "'SOFT' or 'HARD'."})
        stop = JobKind.SHUTDOWN if kind == "SOFT" else JobKind.POWEROFF
        return self.operate(vm, [stop, JobKind.START], "reboot")

    def console_output(self, vm, argument):
        if not holds(self.request.user, OPERATE, vm):
            raise PermissionDenied(
                "Policy doesn't allow os_compute_api:os-console-output to be performed."
            )
        length = (argument or {}).get("length") if isinstance(argument, dict) else None
        if length is not None:
            try:
                length = int(length)
            except (TypeError, ValueError):
                raise ValidationError({"length": f"{length!r} is not a whole number."}) from None
        text = ConsoleLog.objects.filter(vm=vm).values_list("text", flat=True).first() or ""
        if length is not None and length >= 0:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-length:]) if length else ""
        return Response({"output": text})

    def vnc_console(self, vm, argument):
        kind = (argument or {}).get("type") if isinstance(argument, dict) else None
        if kind != "novnc":
            raise ValidationError({"type": "Corral's screens open in noVNC: type 'novnc'."})
        return Response({"console": {"type": "novnc", "url": console_url(self.request, vm)}})


ACTIONS = {
    "os-start": ServerActionView.start,
    "os-stop": ServerActionView.stop,
    "reboot": ServerActionView.reboot,
    "os-getConsoleOutput": ServerActionView.console_output,
    "os-getVNCConsole": ServerActionView.vnc_console,
}


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
