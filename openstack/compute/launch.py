"""Creating servers (``POST /servers``): each server a request asks for (its body read by
bodies.py's ``ServerRequest``) made through Corral's own use cases.

A pool's prestarted VM when the caller may take from a pool of the flavor's template and image
(ACTIVE at once, the caller's keys pushed into the running guest), else a new VM validated as
Corral's API validates one (the rules of reservations included) and started. What Corral
refuses for want of capacity (a reservation full, or not active) Nova's scheduler would refuse
too: the server is accepted and goes to ERROR with the reason as its fault. What the caller may
not do (create a VM there, take one more from the pool) is refused up front, nothing made: a
pool's refusals are ``allocate_vm``'s own, in Nova's statuses.
"""

from __future__ import annotations

import re
import uuid

from django.db import transaction
from django.utils import timezone
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError

from hosts import quotas
from hosts import services as vm_services
from hosts.api.serializers import VirtualMachineSerializer
from hosts.models import Cluster, JobKind, Template, VirtualMachine
from openstack.compute import queries, quota_sets
from openstack.compute.bodies import LaunchSpec
from openstack.compute.services import add_member
from openstack.models import Server
from pools import services as pool_services
from pools.models import VmPool
from project.access.permissions import holds, restrict
from project.errors import Refused


def vm_name(name: str, cluster_id: int | None, ident: uuid.UUID) -> str:
    """A VM name for a server's: its letters, digits, '.', '_' and '-', free in the cluster
    (else with part of the server's id after it)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:52] or "server"
    taken = VirtualMachine.objects.filter(cluster_id=cluster_id, name=base).exists()
    return f"{base}-{ident.hex[:8]}" if taken else base


# What ends a batch once its minimum is made: the caller may hold no more, or no pool has one.
STOPS_A_BATCH = (pool_services.PoolExhausted, pool_services.UserLimitReached, quotas.QuotaExceeded)


def launch(spec: LaunchSpec, user) -> list[Server]:
    """Create the servers a request asks for (one unless ``max_count``), all or none.

    As Nova's quotas do, the caller's quota (``hosts.quotas``), a pool's limit per user or an
    empty pool stops the batch once ``min_count`` servers are made, and refuses it before
    then, nothing made: a quota in Nova's words and status (403, "Quota exceeded for cores:
    Requested 4, but already used 6 of 8 cores").
    """
    batch = uuid.uuid4().hex[:8]
    made = []
    try:
        with transaction.atomic():
            for index in range(spec.count):
                name = spec.name if spec.count == 1 else f"{spec.name}-{index + 1}"
                try:
                    made.append(launch_one(spec, user, name, index, f"r-{batch}"))
                except STOPS_A_BATCH:
                    if index < spec.min_count:
                        raise
                    break
    except pool_services.UserLimitReached as refused:
        raise PermissionDenied(refused.message) from None  # Nova's status for a quota
    except quotas.QuotaExceeded as exceeded:
        raise quota_sets.nova_refusal(exceeded) from None
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
    try:
        vm, refused = from_pool(spec, user), None
    except Refused as refusal:
        vm, refused = None, refusal
    if vm is not None:
        Server.objects.filter(vm=vm).delete()
        record.id, record.vm, record.from_pool = vm.uuid, vm, True
        record.save(force_insert=True)
        return record
    template, cluster = boot_instead(spec, user, refused)
    try:
        with transaction.atomic():
            vm = new_vm(spec, user, name, template, cluster)
            record.id, record.vm = vm.uuid, vm
            record.save(force_insert=True)
            if spec.group is not None:
                add_member(spec.group, vm)
            vm_services.request_operation(vm, JobKind.START, requested_by=user)
    except NotLaunched as not_launched:
        record.id = uuid.uuid4()
        record.vm = None
        record.fault_code, record.fault_message = 500, not_launched.message
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
    them take one (and nothing asked for needs a first boot: user-data, a server group); None
    when no such pool is theirs to take from. When every one refuses (``allocate_vm``'s own
    refusals), raises an empty pool's refusal (trying again later may do) before a limit's."""
    if needs_first_boot(spec):
        return None
    refusals: list[Refused] = []
    for pool in pools_for(spec, user):
        try:
            return pool_services.allocate_vm(pool, user).vm
        except (pool_services.PoolExhausted, pool_services.UserLimitReached) as refused:
            refusals.append(refused)
    if refusals:
        exhausted = [r for r in refusals if isinstance(r, pool_services.PoolExhausted)]
        raise (exhausted or refusals)[0]
    return None


def needs_first_boot(spec: LaunchSpec) -> bool:
    """What the spec asks for only a VM's first boot gives (a pool's running VM cannot)."""
    template = spec.flavor.template
    other_image = spec.image is not None and (
        template is None or spec.image.pk != template.disk_image_id
    )
    return bool(spec.user_data) or spec.group is not None or other_image


def pools_for(spec: LaunchSpec, user) -> list[VmPool]:
    """The pools of the flavor's template (in the zone asked for) the caller may take from."""
    if spec.flavor.template is None:
        return []
    pools = restrict(
        VmPool.objects.filter(template=spec.flavor.template), user, "pools.allocate_vmpool"
    )
    if spec.cluster is not None:
        pools = pools.filter(cluster=spec.cluster)
    return list(pools.order_by("name"))


def boot_target(spec: LaunchSpec, user) -> tuple[Template, Cluster | None]:
    """The template and cluster of a new VM for the spec (no cluster: the reservation's).
    PermissionDenied when the caller may not create a VM there: refused up front, as Nova's
    policy refuses, rather than a server left in ERROR."""
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
        if cluster is None:
            raise PermissionDenied(
                f"You may not create servers of flavor {flavor.id}: no availability zone "
                "lets you create VMs."
            )
    if cluster is not None and not holds(
        user,
        "hosts.add_virtualmachine",
        VirtualMachine(cluster=cluster, template=template, reservation=reservation),
    ):
        raise PermissionDenied(f"You may not create servers in availability zone {cluster.name}.")
    return template, cluster


def boot_instead(
    spec: LaunchSpec, user, refused: Refused | None
) -> tuple[Template, Cluster | None]:
    """``boot_target`` for a server no pool handed out (``refused``: every pool's refusal).
    A pool user who may not create VMs is refused in the pool's words: its rules are the ones
    that apply to them, as in the portal and /api/."""
    try:
        return boot_target(spec, user)
    except PermissionDenied as denied:
        if refused is not None:
            raise refused from None
        pools = pools_for(spec, user) if needs_first_boot(spec) else []
        if not pools:
            raise
        raise PermissionDenied(
            f"{denied.detail} Pool {pools[0].name} hands out running servers of this flavor, "
            "without user_data, a server group or an image of their own."
        ) from None


def new_vm(
    spec: LaunchSpec, user, name: str, template: Template, cluster: Cluster | None
) -> VirtualMachine:
    """A VM of the spec from ``template`` in ``cluster`` (``boot_target``), validated as
    Corral's API validates one (its launch rules, those of reservations included), made by
    the caller."""
    flavor, reservation = spec.flavor, spec.flavor.reservation
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
    templates = queries.usable_templates(user)
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
