"""A flavor's extra specs (``os-extra_specs``) and access list (``os-flavor-access``).

A template's flavor has no extra specs; a reservation's has those Blazar gives it
(``aggregate_instance_extra_specs:reservation`` and, with an affinity rule, ``affinity_id``).
Both come from Corral's objects, so they cannot be set here: admins get a 409 saying so,
others Nova's policy 403 first. The access list is admins' (Nova's policy): a reservation's
flavor is its lease owner's project's, a user's template's its owner's (a private admins'
template's: nobody's, but the admins'); a public flavor has none.
"""

from __future__ import annotations

from rest_framework.response import Response

from openstack.compute.base import Conflict, NovaView, admin_only, missing
from openstack.compute.queries import Flavor, any_reservation_flavor, find_flavor

SPECS_POLICY = "os_compute_api:os-flavor-extra-specs:{}"


def visible_flavor(user, flavor_id: str) -> Flavor:
    found = find_flavor(user, flavor_id)
    if found is None:
        raise missing(f"Flavor {flavor_id} could not be found.")
    return found


class FlavorSpecsWrites(NovaView):
    def refuse(self, request, flavor_id: str, action: str):
        admin_only(request.user, SPECS_POLICY.format(action))
        flavor = admins_flavor(request.user, flavor_id)
        raise Conflict(
            f"Flavor {flavor.id}'s extra specs cannot be changed: Corral derives them from its "
            "template or reservation."
        )


class FlavorExtraSpecsView(FlavorSpecsWrites):
    def get(self, request, flavor_id: str):
        return Response({"extra_specs": visible_flavor(request.user, flavor_id).extra_specs})

    def post(self, request, flavor_id: str):
        self.refuse(request, flavor_id, "create")


class FlavorExtraSpecView(FlavorSpecsWrites):
    def get(self, request, flavor_id: str, key: str):
        flavor = visible_flavor(request.user, flavor_id)
        if key not in flavor.extra_specs:
            raise missing(f"Flavor {flavor.id} has no extra specs with key {key}.")
        return Response({key: flavor.extra_specs[key]})

    def put(self, request, flavor_id: str, key: str):
        self.refuse(request, flavor_id, "update")

    def delete(self, request, flavor_id: str, key: str):
        self.refuse(request, flavor_id, "delete")


def admins_flavor(user, flavor_id: str) -> Flavor:
    return any_reservation_flavor(flavor_id) or visible_flavor(user, flavor_id)


class FlavorAccessView(NovaView):
    def get(self, request, flavor_id: str):
        admin_only(request.user, "os_compute_api:os-flavor-access")
        flavor = admins_flavor(request.user, flavor_id)
        if flavor.is_public:
            raise missing("Access list not available for public flavors.")
        if flavor.reservation is not None:
            owner = flavor.reservation.lease.owner_id
        else:
            owner = flavor.template.owner_id
        access = [] if owner is None else [{"flavor_id": flavor.id, "tenant_id": str(owner)}]
        return Response({"flavor_access": access})
