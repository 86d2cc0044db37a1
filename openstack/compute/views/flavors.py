"""Flavors (``/flavors``, ``/flavors/detail``, ``/flavors/{id}``): Corral's templates and the
flavors Blazar makes for instance reservations (what they are: queries.py)."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from openstack.compute.base import NovaView, missing
from openstack.compute.presenters import flavor_view
from openstack.compute.queries import Flavor, find_flavor, visible_flavors


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
