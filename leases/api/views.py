"""Leases API (Blazar's): create with a capacity check, read, update, delete; and a dry check."""

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from hosts.models import VirtualMachine
from leases import services
from leases.api.filtersets import LeaseFilterSet
from leases.api.serializers import (
    CapacityAnswerSerializer,
    LeaseRefusedSerializer,
    LeaseRequestSerializer,
    LeaseSerializer,
    LeaseUpdateSerializer,
)
from leases.capacity import DoesNotFit, plan
from leases.models import Allocation, Lease, Reservation
from project.access.permissions import holds
from project.api.viewsets import ScopedModelViewSet


def json_body(serializer) -> dict:
    """Lease bodies nest lists of objects, which only JSON carries; the schema says so."""
    return {"application/json": serializer}


class LeaseViewSet(ScopedModelViewSet):
    """Leases: capacity reserved for a time window. You see your own (and your group's)."""

    queryset = Lease.objects.select_related("owner", "group").prefetch_related(
        Prefetch(
            "reservations",
            queryset=Reservation.objects.prefetch_related(
                Prefetch("allocations", queryset=Allocation.objects.select_related("host")),
                Prefetch("vms", queryset=VirtualMachine.objects.only("pk", "reservation_id")),
            ),
        ),
        "events",
    )
    serializer_class = LeaseSerializer
    filterset_class = LeaseFilterSet
    search_fields = ["name"]
    ordering_fields = ["start_date", "end_date", "name", "id"]

    def _may_create(self) -> None:
        if not holds(self.request.user, "leases.add_lease"):
            raise PermissionDenied("Creating leases needs the LeaseUser role.")

    @extend_schema(
        request=json_body(LeaseRequestSerializer),
        responses={
            201: LeaseSerializer,
            409: OpenApiResponse(
                LeaseRefusedSerializer,
                description="Refused: the lease does not fit, or breaks a quota or a limit.",
            ),
        },
    )
    def create(self, request, *args, **kwargs):
        self._may_create()
        body = LeaseRequestSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        lease = services.create_lease(
            owner=request.user,
            name=data["name"],
            start=data["start"],
            end=data["end"],
            before_end=data["before_end"],
            reservations=[dict(r) for r in data["reservations"]],
            end_action=data["end_action"],
            group=data.get("group"),
        )
        return Response(
            LeaseSerializer(self.queryset.get(pk=lease.pk)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(request=json_body(LeaseUpdateSerializer), responses=LeaseSerializer)
    def update(self, request, *args, **kwargs):
        lease = self.get_object()
        body = LeaseUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.update_lease(lease, body.validated_data)
        return Response(LeaseSerializer(self.queryset.get(pk=lease.pk)).data)

    @extend_schema(request=json_body(LeaseUpdateSerializer), responses=LeaseSerializer)
    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, **kwargs)

    def destroy(self, request, *args, **kwargs):
        """Delete a lease; an active one ends first (its VMs stopped or deleted)."""
        services.delete_lease(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=json_body(LeaseRequestSerializer), responses=CapacityAnswerSerializer)
    @action(detail=False, methods=["post"])
    def check(self, request):
        """Would this lease fit now? Nothing is reserved."""
        self._may_create()
        body = LeaseRequestSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            plan(data["start"], data["end"], [dict(r) for r in data["reservations"]], lock=False)
        except DoesNotFit as exc:
            return Response({"fits": False, "message": f"Does not fit: {exc}."})
        return Response({"fits": True, "message": "Fits."})
