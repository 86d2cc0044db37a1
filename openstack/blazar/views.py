"""Blazar's views (HTTP only): leases and os-hosts, shown by presenters.py, their bodies read
by bodies.py, their writes the use cases of leases (``leases.services``, ``leases.free_pool``).

Leases: list, create, show, update (dates, moves of them, reservations), delete. The same use
cases as /api/leases/ (leases/services.py), checked with the same grants: a lease the caller
may not see is "not found", one they may see but not change is a 403 in Blazar's words (its
policy's). Blazar's own checks of a request come first, with its messages (bodies.py);
Corral's validation then applies the rest.

os-hosts: the reservable hosts, their allocations and their properties. A Blazar host is a
Corral host that is reservable: ``POST /os-hosts`` marks an existing Corral host reservable
(found by name, ``cluster/name`` or id), VMs running on it counted until they stop; ``DELETE``
un-marks it and never deletes the Corral host: the leases holding it are planned again
elsewhere (degraded when that falls short), refused while their VMs run there. Hosts are seen
through the caller's grants (``hosts.view_host``); changing one takes ``hosts.change_host`` on
it, and making a property private a system-wide grant of it. As in Blazar (and Nova), an
admin-only call checks the caller's role before looking anything up: a caller holding
``hosts.change_host`` nowhere gets Blazar's policy refusal (403), never a 404.
"""

from __future__ import annotations

import uuid

from django.db.models import Prefetch
from django.utils import timezone
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from hosts.models import Host
from leases import free_pool, services
from leases.api.serializers import LeaseRequestSerializer, LeaseUpdateSerializer
from leases.models import Allocation, EndAction, Lease, LeaseEvent, Reservation
from openstack.blazar import bodies
from openstack.blazar.base import BlazarView, missing, policy_refused
from openstack.blazar.bodies import capabilities_of
from openstack.blazar.presenters import blazar_time, host_view, lease_view
from openstack.identity.catalog import base_url
from project.access.permissions import holds, holds_at_system, restrict

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
        start, end = bodies.check_create(raw)
        # Blazar checks before_end_date after the reservations: Corral's validation of those
        # runs without it.
        without = {k: v for k, v in raw.items() if k not in bodies.BEFORE_END}
        body = LeaseRequestSerializer(data=without, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        before_end = bodies.check_before_end(raw, start, end)
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
        bodies.check_update(lease, raw)
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


ADMIN = "hosts.change_host"


def require_admin_role(user, verb: str) -> None:
    """Blazar's policy ``blazar:oshosts:<verb>`` (admin only): an admin role on some host, checked
    before any lookup; which hosts it covers is checked on the host found."""
    if not holds(user, ADMIN):
        raise policy_refused(f"blazar:oshosts:{verb}")


def visible_hosts(user, reservable_only: bool = True):
    hosts = Host.objects.select_related("cluster").order_by("name", "id")
    if reservable_only:
        hosts = hosts.filter(reservable=True)
    return restrict(hosts, user, "hosts.view_host")


def reservable_host(request, host_id: str, admin: bool = False) -> Host:
    """A reservable host the caller may see (else not found); with ``admin``, one they may
    change (else 403)."""
    host = visible_hosts(request.user).filter(pk=int(host_id)).first() if _is_id(host_id) else None
    if host is None:
        raise missing("Host", host_id)
    if admin and not holds(request.user, ADMIN, host):
        raise PermissionDenied(f"Changing reservable host {host.name} needs an admin role on it.")
    return host


def _is_id(value) -> bool:
    return isinstance(value, str | int) and str(value).isdigit() and len(str(value)) < 19


def _corral_host(request, body: dict) -> Host:
    """The Corral host a create names: ``id``, or ``name`` (``cluster/name`` when several
    clusters have a host of that name)."""
    ident, name = body.pop("id", None), body.pop("name", None)
    hosts = visible_hosts(request.user, reservable_only=False)
    if ident is not None:
        found = list(hosts.filter(pk=int(ident))) if _is_id(ident) else []
        label = ident
    elif isinstance(name, str) and name:
        cluster, _, host_name = name.rpartition("/")
        found = list(
            hosts.filter(name=host_name, **({"cluster__name": cluster} if cluster else {}))
        )
        label = name
    else:
        raise ValidationError({"name": "The name of the Corral host to make reservable."})
    if not found:
        raise missing("Host", label)
    if len(found) > 1:
        clusters = ", ".join(host.cluster.name for host in found)
        raise ValidationError(
            {"name": f"Hosts named {name} are in clusters {clusters}: give cluster/name or id."}
        )
    return found[0]


class HostsView(BlazarView):
    def get(self, request):
        return Response({"hosts": [host_view(host) for host in visible_hosts(request.user)]})

    def post(self, request):
        require_admin_role(request.user, "post")
        body = dict(self.body())
        host = _corral_host(request, body)
        if not holds(request.user, ADMIN, host):
            raise PermissionDenied(f"Making host {host.name} reservable needs an admin role on it.")
        host = free_pool.make_reservable(host, capabilities_of(body, removals=False))
        return Response({"host": host_view(host)}, status=status.HTTP_201_CREATED)


class HostView(BlazarView):
    def get(self, request, host_id):
        return Response({"host": host_view(reservable_host(request, host_id))})

    def put(self, request, host_id):
        require_admin_role(request.user, "put")
        host = reservable_host(request, host_id, admin=True)
        body = self.body()
        if not body:
            raise ValidationError("No data to update")
        host = free_pool.update_capabilities(host, capabilities_of(body, removals=True))
        return Response({"host": host_view(host)})

    def delete(self, request, host_id):
        """204 as Blazar answers when no live lease held the host; otherwise 200 with what
        happened to each reservation that did (where Blazar would have refused)."""
        require_admin_role(request.user, "delete")
        host, outcomes = free_pool.make_unreservable(reservable_host(request, host_id, admin=True))
        if not outcomes:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(
            {"host": host_view(host), "reservations": [outcome.as_dict() for outcome in outcomes]}
        )


def _allocations(hosts, query) -> dict[int, list[dict]]:
    """Host id -> the live reservations holding capacity on it from now on (filtered by the
    ``lease_id`` and ``reservation_id`` Blazar's query accepts)."""
    rows = Allocation.objects.live(timezone.now()).filter(host__in=hosts)
    rows = rows.select_related("reservation__lease")
    held: dict[int, list[dict]] = {host.pk: [] for host in hosts}
    for allocation in rows.order_by("reservation__lease__start_date", "id"):
        lease = allocation.reservation.lease
        item = {
            "id": str(allocation.reservation_id),
            "lease_id": str(lease.uuid),
            "start_date": blazar_time(lease.start_date),
            "end_date": blazar_time(lease.end_date),
        }
        if query.get("lease_id", item["lease_id"]) != item["lease_id"]:
            continue
        if query.get("reservation_id", item["id"]) != item["id"]:
            continue
        held[allocation.host_id].append(item)
    return held


class AllocationsView(BlazarView):
    def get(self, request):
        require_admin_role(request.user, "get_allocations")
        hosts = list(visible_hosts(request.user))
        held = _allocations(hosts, request.query_params)
        return Response(
            {
                "allocations": [
                    {"resource_id": str(host.pk), "reservations": held[host.pk]} for host in hosts
                ]
            }
        )


class HostAllocationView(BlazarView):
    def get(self, request, host_id):
        require_admin_role(request.user, "get_allocations")
        host = reservable_host(request, host_id)
        held = _allocations([host], request.query_params)
        return Response(
            {"allocation": {"resource_id": str(host.pk), "reservations": held[host.pk]}}
        )


def _flag(value: str | None) -> bool:
    return str(value).strip().lower() in {"true", "1", "yes"}


class PropertiesView(BlazarView):
    """``?detail=True`` adds values and privacy; ``?all=True`` adds private properties, for
    those who may make them private."""

    def get(self, request):
        everything = _flag(request.query_params.get("all")) and holds_at_system(request.user, ADMIN)
        found = free_pool.host_properties(include_private=everything)
        if not _flag(request.query_params.get("detail")):
            found = [{"property": item["property"]} for item in found]
        return Response({"resource_properties": found})


class PropertyView(BlazarView):
    def patch(self, request, property_name):
        if not holds_at_system(request.user, ADMIN):
            raise policy_refused("blazar:oshosts:update_resource_properties")
        body = self.body()
        unknown = sorted(set(body) - {"private"})
        if unknown:
            raise ValidationError(
                {name: "Unknown field; only private can change." for name in unknown}
            )
        if not isinstance(body.get("private"), bool):
            raise ValidationError({"private": "true or false."})
        prop = free_pool.set_property_private(property_name, body["private"])
        if prop is None:
            raise missing("Property", property_name)
        return Response(
            {
                "resource_property": {
                    "id": str(prop.pk),
                    "resource_type": "physical:host",
                    "property_name": prop.name,
                    "private": prop.private,
                    "created_at": blazar_time(prop.created_at),
                    "updated_at": blazar_time(prop.updated_at),
                }
            }
        )
