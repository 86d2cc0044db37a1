"""Blazar's leases: list, create, show, update (dates, moves of them, reservations), delete.

The same use cases as /api/leases/ (leases/services.py), checked with the same grants: a lease
the caller may not see is "not found", one they may see but not change is a 403 in Blazar's
words (its policy's). Blazar's own checks of a request come first, with its messages
(lease_checks.py); Corral's validation then applies the rest.
"""

from __future__ import annotations

import uuid

from django.db.models import Prefetch
from rest_framework import status
from rest_framework.response import Response

from leases import services
from leases.api.serializers import LeaseRequestSerializer, LeaseUpdateSerializer
from leases.models import EndAction, Lease, LeaseEvent, Reservation
from openstack.blazar import lease_checks
from openstack.blazar.errors import BlazarView, missing, policy_refused
from openstack.blazar.serializers import lease_view
from openstack.identity.catalog import base_url
from project.permissions import holds, restrict

# Corral's action on a lease -> the verb of Blazar's policy for it (blazar:leases:<verb>).
POLICY_VERBS = {"change": "put", "delete": "delete"}


def visible_leases(user):
    leases = Lease.objects.prefetch_related(
        Prefetch("reservations", queryset=Reservation.objects.order_by("id")),
        Prefetch("events", queryset=LeaseEvent.objects.order_by("time", "id")),
    ).order_by("start_date", "name", "id")
    return restrict(leases, user, "leases.view_lease")


class LeasesView(BlazarView):
    def get(self, request):
        return Response({"leases": [lease_view(lease) for lease in visible_leases(request.user)]})

    def post(self, request):
        if not holds(request.user, "leases.add_lease"):
            raise policy_refused("blazar:leases:post")
        raw = self.body()
        start, end = lease_checks.check_create(raw)
        # Blazar checks before_end_date after the reservations: Corral's validation of those
        # runs without it.
        without = {k: v for k, v in raw.items() if k not in lease_checks.BEFORE_END}
        body = LeaseRequestSerializer(data=without, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        before_end = lease_checks.check_before_end(raw, start, end)
        lease = services.create_lease(
            owner=request.user,
            name=data["name"],
            start=data["start"],
            end=data["end"],
            before_end=before_end,
            reservations=[dict(r) for r in data["reservations"]],
            # Blazar deletes a lease's servers when it ends (its plugins' on_end): so does a
            # lease made here, unless the body asks Corral for another end.
            end_action=data["end_action"] if "end_action" in raw else EndAction.DELETE,
            group=data.get("group"),
        )
        lease = visible_leases(request.user).get(pk=lease.pk)
        return Response({"lease": lease_view(lease)}, status=status.HTTP_201_CREATED)


class LeaseView(BlazarView):
    def lease(self, lease_id: str, action: str | None = None) -> Lease:
        """The lease, if the caller may see it (else not found) and do ``action`` on it."""
        try:
            key = uuid.UUID(lease_id)
        except ValueError:
            raise missing("Lease", lease_id) from None
        lease = visible_leases(self.request.user).filter(uuid=key).first()
        if lease is None:
            raise missing("Lease", lease_id)
        if action and not holds(self.request.user, f"leases.{action}_lease", lease):
            raise policy_refused(f"blazar:leases:{POLICY_VERBS[action]}")
        return lease

    def get(self, request, lease_id):
        return Response({"lease": lease_view(self.lease(lease_id))})

    def put(self, request, lease_id):
        """An empty body changes nothing and answers the lease, as Blazar does."""
        lease = self.lease(lease_id, "change")
        raw = self.body()
        if not raw:
            return Response({"lease": lease_view(lease)})
        lease_checks.check_update(lease, raw)
        body = LeaseUpdateSerializer(data=raw)
        body.is_valid(raise_exception=True)
        services.update_lease(lease, body.validated_data)
        return Response({"lease": lease_view(self.lease(lease_id))})

    def delete(self, request, lease_id):
        """Delete a lease; an active one ends first (its VMs stopped or deleted)."""
        services.delete_lease(self.lease(lease_id, "delete"))
        return Response(status=status.HTTP_204_NO_CONTENT)


class VersionsView(BlazarView):
    """``GET /reservation``: the API versions (no token needed), as Blazar lists them."""

    authentication_classes = []
    permission_classes = []

    def get(self, request):
        url = f"{base_url(request)}/reservation/v1"
        return Response(
            {
                "versions": [
                    {"id": "v1.0", "status": "CURRENT", "links": [{"href": url, "rel": "self"}]}
                ]
            },
            status=status.HTTP_300_MULTIPLE_CHOICES,
        )
