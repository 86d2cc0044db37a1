"""Server groups (``os-server-groups``, HTTP only): Corral's affinity groups, and the group each
instance reservation with an affinity rule stands for (found by queries.py, shown by
presenters.py, made and deleted by services.py).

An affinity group's VM rule is its policy: positive and enforcing is ``affinity``, negative
and enforcing ``anti-affinity``, not enforcing ``soft-affinity`` / ``soft-anti-affinity``
(2.15); its members are its VMs. A reservation's group has the policy of its rule and the
reservation's VMs as members; its owner sees it while the lease is active, and it ends with
the reservation (it cannot be deleted on its own). Groups made here land in the first cluster
(by name) where the caller may create servers (where a server booted without a zone goes),
else where they may add affinity groups, under a valid name unique there; the name given to
Nova and the user who made it are kept beside it (``openstack.models.NovaServerGroup``).

As Nova's default policy lets a project's members create server groups and show, use and
delete their own, whoever may create servers may make groups, and the user who made a group
sees it, boots servers into it and deletes it whatever their grants; others need the affinity
group's own actions (``scheduling.view_affinitygroup`` …) and see nothing otherwise (a 404).
"""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from openstack.compute import services
from openstack.compute.base import NovaView, missing
from openstack.compute.bodies import checked_group_name, checked_policy
from openstack.compute.group_ids import affinity_group_id
from openstack.compute.presenters import server_group_body
from openstack.compute.queries import ServerGroup, find_group, visible_groups


class ServerGroupsView(NovaView):
    def get(self, request):
        groups = visible_groups(request.user)
        offset = _whole(request, "offset")
        limit = _whole(request, "limit")
        groups = groups[offset or 0 :]
        if limit is not None:
            groups = groups[:limit]
        return Response({"server_groups": [server_group_body(self, g) for g in groups]})

    def post(self, request):
        given = self.body("server_group")
        name = checked_group_name(given.get("name"))
        policy = checked_policy(self, given.get("policies"))
        unknown = sorted(set(given) - {"name", "policies"})
        if unknown:
            raise ValidationError({unknown[0]: "Additional properties are not allowed."})
        group = services.create_group(request.user, name, policy)
        found = find_group(request.user, affinity_group_id(group))
        return Response({"server_group": server_group_body(self, found)})


def _whole(request, name: str) -> int | None:
    given = request.query_params.get(name)
    if given is None:
        return None
    if not given.isdigit():
        raise ValidationError({name: f"Invalid value {given!r}: a whole number is needed."})
    return int(given)


class ServerGroupView(NovaView):
    def get(self, request, group_id: str):
        return Response({"server_group": server_group_body(self, self.group(group_id))})

    def delete(self, request, group_id: str):
        services.delete_group(request.user, self.group(group_id))
        return Response(status=status.HTTP_204_NO_CONTENT)

    def group(self, group_id: str) -> ServerGroup:
        found = find_group(self.request.user, group_id)
        if found is None:
            raise missing(f"Instance group {group_id} could not be found.")
        return found
