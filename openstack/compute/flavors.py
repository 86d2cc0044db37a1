"""Flavors: Corral's templates and the flavors Blazar makes for instance reservations.

Each template a user may use is a public flavor of its size, its id the template's name (a
name of digits only would read as a reservation's id: such a template's id is
``template:<name>``). Each instance reservation of an active lease is the private flavor
Blazar makes for it, seen by the lease's project (its owner) only while the lease is active:
id the reservation's id, name ``reservation:<id>``, extra specs
``aggregate_instance_extra_specs:reservation`` and, with an affinity rule, ``affinity_id``
(the reservation's server group). Booting with it launches into the reservation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from hosts.models import Template
from leases.models import LeaseStatus, Reservation, ResourceType
from openstack.compute.base import NovaView, missing, policy_refused
from openstack.compute.group_ids import reservation_group_id
from openstack.identity.catalog import base_url
from pools.models import VmPool
from project.permissions import holds_at_system, restrict

RESERVATION_SPEC = "aggregate_instance_extra_specs:reservation"


@dataclass
class Flavor:
    id: str
    name: str
    vcpus: int
    ram: int
    disk: int
    is_public: bool
    template: Template | None = None
    reservation: Reservation | None = None
    extra_specs: dict = field(default_factory=dict)


def template_flavor_id(template: Template) -> str:
    return f"template:{template.name}" if template.name.isdigit() else template.name


def template_flavor(template: Template) -> Flavor:
    return Flavor(
        id=template_flavor_id(template),
        name=template.name,
        vcpus=template.vcpus,
        ram=template.memory_mb,
        disk=template.disk_gb,
        is_public=True,
        template=template,
    )


def reservation_flavor(reservation: Reservation) -> Flavor:
    specs = {RESERVATION_SPEC: str(reservation.pk)}
    group = reservation_group_id(reservation)
    if group is not None:
        specs["affinity_id"] = group
    return Flavor(
        id=str(reservation.pk),
        name=f"reservation:{reservation.pk}",
        vcpus=reservation.vcpus or 0,
        ram=reservation.memory_mb or 0,
        disk=reservation.disk_gb or 0,
        is_public=False,
        reservation=reservation,
        extra_specs=specs,
    )


def pool_templates(user):
    """The templates of the pools ``user`` may take VMs from: a pool user launches them (as
    ``server create`` with the pool's flavor and image, which hands over a pool's VM) without
    any grant on templates."""
    pools = restrict(VmPool.objects.all(), user, "pools.allocate_vmpool")
    return Template.objects.filter(pools__in=pools)


def usable_templates(user):
    """The templates ``user`` may launch: those they may see, and their pools'."""
    seen = restrict(Template.objects.all(), user, "hosts.view_template")
    pooled = Template.objects.filter(pk__in=pool_templates(user).values("pk"))
    return (seen | pooled).select_related("disk_image", "cluster")


def active_instance_reservations():
    """The instance reservations of active leases: each is a private flavor."""
    return Reservation.objects.filter(
        resource_type=ResourceType.INSTANCE, lease__status=LeaseStatus.ACTIVE
    ).select_related("lease")


def reservations_of(user):
    """The instance reservations of the user's active leases (their private flavors)."""
    return active_instance_reservations().filter(lease__owner=user)


def visible_flavors(user) -> list[Flavor]:
    templates = [template_flavor(t) for t in usable_templates(user).order_by("name")]
    reserved = [reservation_flavor(r) for r in reservations_of(user).order_by("pk")]
    return templates + reserved


def reference(ref) -> str:
    """A flavor or image reference: an id, or a URL that ends with one."""
    text = str(ref or "").strip()
    if "://" in text or text.startswith("/"):
        text = urlsplit(text).path.rstrip("/").rsplit("/", 1)[-1]
    return text


def find_flavor(user, ref) -> Flavor | None:
    """The flavor ``ref`` names, if the caller may use it."""
    ident = reference(ref)
    if ident.isdigit() and len(ident) < 19:
        found = reservations_of(user).filter(pk=int(ident)).first()
        return reservation_flavor(found) if found is not None else None
    name = ident.removeprefix("template:") if ident.startswith("template:") else ident
    if not name or (name.isdigit() and not ident.startswith("template:")):
        return None
    found = usable_templates(user).filter(name=name).first()
    return template_flavor(found) if found is not None else None


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


def is_admin(user) -> bool:
    return user.is_superuser or holds_at_system(user, "hosts.change_host")


def admin_only(user, action: str) -> None:
    """Nova's policy check, made before any lookup."""
    if not is_admin(user):
        raise policy_refused(action)


def _listed(request, detail: bool) -> list[dict]:
    flavors = visible_flavors(request.user)
    is_public = request.query_params.get("is_public", "true").lower()
    # Nova's default (true): public flavors and the private ones the project may use.
    if is_public in ("false", "0", "no", "f", "n", "off"):
        flavors = [flavor for flavor in flavors if not flavor.is_public]
    for name, attribute in (("minRam", "ram"), ("minDisk", "disk")):
        given = request.query_params.get(name)
        if given is not None:
            if not given.isdigit():
                raise missing_parameter(name, given)
            flavors = [f for f in flavors if getattr(f, attribute) >= int(given)]
    marker = request.query_params.get("marker")
    if marker is not None:
        ids = [flavor.id for flavor in flavors]
        if marker not in ids:
            raise missing(f"Marker {marker} could not be found.")
        flavors = flavors[ids.index(marker) + 1 :]
    limit = request.query_params.get("limit")
    if limit is not None:
        if not limit.isdigit():
            raise missing_parameter("limit", limit)
        flavors = flavors[: int(limit)]
    return [flavor_view(request, flavor, detail) for flavor in flavors]


def missing_parameter(name: str, value: str) -> ValidationError:
    return ValidationError({name: f"Invalid value {value!r}: a whole number is needed."})


class FlavorsView(NovaView):
    def get(self, request):
        return Response({"flavors": _listed(request, detail=False)})


class FlavorsDetailView(NovaView):
    def get(self, request):
        return Response({"flavors": _listed(request, detail=True)})


class FlavorView(NovaView):
    def get(self, request, flavor_id: str):
        return Response({"flavor": flavor_view(request, self.flavor(flavor_id))})

    def flavor(self, flavor_id: str) -> Flavor:
        found = find_flavor(self.request.user, flavor_id)
        if found is None:
            raise missing(f"Flavor {flavor_id} could not be found.")
        return found
