"""Nova's writes and the policy that guards them: what only Nova keeps of a server (its name,
description, metadata), a server's deletion (a pool's VM goes back to its pool), its power
operations, an image of its disk, server groups made, joined and deleted as Corral's affinity
groups, and key pairs made (Corral's SSH keys, ``project.sshkeys``). Creating servers:
launch.py.

Like Glance's services, they refuse in the API's own errors (base.py's), which the views
answer as they come; Corral's own rules are the use cases' they call (hosts, pools).
"""

from __future__ import annotations

import re
import uuid

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.db import IntegrityError, transaction
from rest_framework.exceptions import PermissionDenied, ValidationError

from hosts import quotas, vm_images
from hosts import services as vm_services
from hosts.models import Cluster, Image, ImageFormat, ImageVisibility, VirtualMachine
from openstack.compute import quota_sets
from openstack.compute.base import Conflict, policy_refused
from openstack.compute.bodies import check_metadata, server_name
from openstack.compute.presenters import vm_state
from openstack.compute.queries import POLICIES, ServerGroup, made_by, template_flavor_id
from openstack.image import services as image_services
from openstack.models import GlanceImage, NovaServerGroup, Server
from pools import services as pool_services
from project import sshkeys
from project.access.permissions import holds, restrict
from project.error_codes import ProjectErrorCode
from project.errors import Refused
from project.models import SshKey
from project.names import validate_object_name
from scheduling.models import AffinityGroup

OPERATE = "hosts.operate_virtualmachine"
CHANGE = "hosts.change_virtualmachine"
DELETE = "hosts.delete_virtualmachine"
CREATE_SERVER = "hosts.add_virtualmachine"
ADD_GROUP = "scheduling.add_affinitygroup"
DELETE_GROUP = "scheduling.delete_affinitygroup"
RULES = {policy: rule for rule, policy in POLICIES.items()}
GENERATED_BITS = 2048
GENERATED_COMMENT = "Generated-by-Corral"


def own_record(vm: VirtualMachine, record: Server | None) -> Server:
    """The server row of a VM, made now for one made outside Nova's API (named after the VM)
    when something Nova keeps is about to change."""
    if record is not None:
        return record
    Server.objects.filter(vm=vm).delete()  # a former holder's
    return Server.objects.create(
        id=vm.uuid,
        vm=vm,
        owner_id=vm.owner_id,
        name=vm.name,
        flavor_id=template_flavor_id(vm.template),
        from_pool=vm.pool_id is not None,
    )


def update_server(
    user, vm: VirtualMachine | None, record: Server | None, body: dict, *, description: bool
) -> Server:
    """Set Nova's fields of a server from a ``PUT /servers/{id}`` body: its name, and its
    description when the microversion has them (``description``); refused (403) to who may
    not change the VM."""
    if vm is not None and not holds(user, CHANGE, vm):
        raise policy_refused("os_compute_api:servers:update")
    changes = {}
    if "name" in body:
        changes["name"] = server_name(body["name"])
    if "description" in body and description:
        changes["description"] = body["description"]
    with transaction.atomic():
        record = own_record(vm, record)
        for key, value in changes.items():
            setattr(record, key, value)
        record.save()
    return record


def check_changeable(user, server_id: str, vm: VirtualMachine | None) -> None:
    """Refuse a metadata change on a server that never became a VM (409) or by who may not
    change the VM (403)."""
    if vm is None:
        raise Conflict(f"Instance {server_id} is in vm_state error; delete it.")
    if not holds(user, CHANGE, vm):
        raise policy_refused("os_compute_api:server-metadata:update")


def write_metadata(vm: VirtualMachine, record: Server | None, given: dict, *, replace: bool):
    """A server's metadata replaced by ``given``, or ``given`` merged into it (at most
    Nova's number of items either way)."""
    with transaction.atomic():
        record = own_record(vm, record)
        merged = given if replace else {**record.metadata, **given}
        record.metadata = check_metadata(merged)
        record.save(update_fields=["metadata", "updated_at"])
    return record


def delete_metadata_item(record: Server, key: str) -> None:
    record.metadata = {k: v for k, v in record.metadata.items() if k != key}
    record.save(update_fields=["metadata", "updated_at"])


def delete_server(user, vm: VirtualMachine | None, record: Server | None) -> None:
    """Delete a server: a server that never became a VM goes at once; a pool's VM its holder
    deletes goes back to its pool (the server is gone for them); any other VM is destroyed,
    by who may delete it, unless it belongs to a pool (409: remove it from the pool first)."""
    if vm is None:
        record.delete()
        return
    with transaction.atomic():
        if vm.pool_id is not None and vm.owner_id == user.pk:
            Server.objects.filter(vm=vm).delete()
            pool_services.return_vm(vm, requested_by=user)
            return
        if not holds(user, DELETE, vm):
            raise policy_refused("os_compute_api:servers:delete")
        if vm.pool_id is not None:
            raise Conflict(
                f"Server {vm.uuid} belongs to pool {vm.pool.name}; remove it from the pool "
                "in Corral first."
            )
        vm_services.destroy_vm(vm, requested_by=user)


def operate(user, vm: VirtualMachine, kinds: list[str], action: str, rule: str) -> None:
    """Queue the operations of a server action (one transaction: all or none); refused (403)
    to who may not operate the VM, and (409, in Nova's words) when the VM cannot take them
    from its state."""
    if not holds(user, OPERATE, vm):
        raise policy_refused(f"os_compute_api:{rule}")
    with transaction.atomic():
        try:
            for kind in kinds:
                vm_services.request_operation(vm, kind, requested_by=user)
        except Refused as refused:
            raise Conflict(
                f"Cannot '{action}' instance {vm.uuid} while it is in vm_state "
                f"{vm_state(vm)}: {refused.message}"
            ) from None


def image_of_server(user, vm: VirtualMachine, name: str, metadata: dict) -> Image:
    """Nova's ``createImage``: an image of the server's disk, made by Corral's job
    (``hosts.vm_images``), private to the caller and counted in their quota. Glance shows it
    with the name given (Corral's own derived from it, as for an image made through Glance)
    and the metadata as its properties, with Nova's ``image_type`` ``snapshot`` and the
    server's ``instance_uuid``; saving until the job has made it. Refused (403) to who may not
    operate the server, Nova's 403 for a quota, 409 when its state does not allow it."""
    if not vm_images.may_make_image(user, vm):
        raise policy_refused("os_compute_api:servers:create_image")
    glance = GlanceImage(
        id=uuid.uuid4(),
        name=name,
        disk_format=ImageFormat.QCOW2,
        container_format="bare",
        owner=user,
        visibility=ImageVisibility.PRIVATE,
        properties={**metadata, "image_type": "snapshot", "instance_uuid": str(vm.uuid)},
    )
    try:
        with transaction.atomic():
            _job, image = vm_images.request_image(
                vm,
                name=image_services.corral_name(glance),
                requested_by=user,
                visibility=ImageVisibility.PRIVATE,
                description=f"Made from server {vm.name} through Nova's API as {name!r}.",
                uuid=glance.id,
            )
            glance.image = image
            glance.save()
    except quotas.QuotaExceeded as exceeded:
        raise quota_sets.nova_refusal(exceeded) from None
    except Refused as refused:
        raise Conflict(
            f"Cannot 'createImage' instance {vm.uuid} while it is in vm_state "
            f"{vm_state(vm)}: {refused.message}"
        ) from None
    return image


def corral_name(name: str, cluster: Cluster, taken: set[str]) -> str:
    """A valid affinity group name derived from Nova's ``name``, unused in the cluster."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip("._-")[:56].rstrip("._-")
    base = base or "server-group"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    validate_object_name(candidate)
    return candidate


def target_cluster(user) -> Cluster:
    """The first cluster (by name) where the user may create servers, the one a server booted
    without an availability zone lands in (a group is for booting servers into, and they boot
    in its cluster); else the first where they may add affinity groups; 403 when neither."""
    clusters = Cluster.objects.order_by("name")
    cluster = restrict(clusters, user, CREATE_SERVER).first()
    if cluster is not None:
        return cluster
    for cluster in restrict(clusters, user, ADD_GROUP):
        if holds(user, ADD_GROUP, AffinityGroup(cluster=cluster)):
            return cluster
    raise policy_refused("os_compute_api:os-server-groups:create")


def create_group(user, name: str, policy: str) -> AffinityGroup:
    """An affinity group for a Nova server group, in the cluster ``target_cluster`` picks,
    with Nova's name and its maker kept beside it."""
    cluster = target_cluster(user)
    rule, enforcing = RULES[policy]
    for _attempt in range(5):
        taken = set(AffinityGroup.objects.filter(cluster=cluster).values_list("name", flat=True))
        group = AffinityGroup(
            cluster=cluster,
            name=corral_name(name, cluster, taken),
            description=f"Made through Nova's API as server group {name!r}.",
            vm_rule=rule,
            vm_enforcing=enforcing,
        )
        try:
            with transaction.atomic():
                group.full_clean(validate_unique=False)
                group.save()
                NovaServerGroup.objects.create(affinity_group=group, name=name, user=user)
                return group
        except IntegrityError:
            continue  # the name was taken at the same moment: derive another
    raise Conflict("Could not find a free name for the server group; try again.")


def add_member(group: ServerGroup, vm) -> None:
    """Put ``vm`` into ``group``: into its affinity group (a VM of the group's cluster only);
    for a reservation's group nothing, as launching into the reservation is the membership.
    Refused (403) unless ``group.may_add_members``."""
    if not group.may_add_members:
        raise PermissionDenied(f"You may not add servers to server group {group.id}.")
    affinity_group = group.affinity_group
    if affinity_group is None:
        return
    if vm.cluster_id != affinity_group.cluster_id:
        raise Conflict(
            f"Server group {group.id} keeps servers of cluster {affinity_group.cluster.name}; "
            f"{vm.name} is not in it."
        )
    affinity_group.vms.add(vm)
    group.members.append(str(vm.uuid))


def delete_group(user, group: ServerGroup) -> None:
    """Delete a server group's affinity group, by its maker or who may delete it; a
    reservation's group ends with its lease (409)."""
    if group.reservation is not None:
        raise Conflict(
            f"Server group {group.id} is reservation {group.reservation.pk}'s: it ends "
            "with its lease and cannot be deleted on its own."
        )
    affinity_group = group.affinity_group
    if not (made_by(user, affinity_group) or holds(user, DELETE_GROUP, affinity_group)):
        raise policy_refused("os_compute_api:os-server-groups:delete")
    affinity_group.delete()


def create_keypair(user, name: str, public_key: str | None) -> tuple[SshKey, str | None]:
    """A key pair of ``user``: ``public_key`` imported, or, without one, a new RSA key made as
    Nova makes one, its private half returned (the only time it is known; Corral keeps only
    the public half). ``project.sshkeys``' refusals in Nova's terms."""
    private = None
    if public_key is None:
        private, public_key = generated_key()
    try:
        key = sshkeys.add_key(user, name, public_key)
    except Refused as refused:
        raise nova_refusal(refused, name) from refused
    return key, private


def generated_key() -> tuple[str, str]:
    """A new RSA key as Nova makes one: (private key in PEM, public key line)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=GENERATED_BITS)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, f"{public.decode()} {GENERATED_COMMENT}"


def nova_refusal(refused: Refused, name: str) -> Exception:
    """A refusal of ``project.sshkeys`` in Nova's terms."""
    if refused.code == ProjectErrorCode.DUPLICATE_NAME:
        return Conflict(f"Key pair '{name}' already exists.")
    if refused.code == ProjectErrorCode.TOO_MANY_KEYS:
        return PermissionDenied(f"Quota exceeded, too many key pairs. {refused.message}")
    if refused.field == "public_key":
        return ValidationError(
            {"public_key": f"Keypair data is invalid: {refused.message}"}, code=refused.code
        )
    if refused.field:
        return ValidationError({refused.field: refused.message}, code=refused.code)
    return Conflict(refused.message)
