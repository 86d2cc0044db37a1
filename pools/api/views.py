"""VM pools API: CRUD with counts, and taking a VM from a pool."""

from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from hosts.api.serializers import JobSerializer
from hosts.models import JobState, VirtualMachine
from pools import services
from pools.api.filtersets import VmPoolFilterSet
from pools.api.serializers import (
    PoolAllocationSerializer,
    PoolUpdateResultSerializer,
    VmPoolSerializer,
)
from pools.models import VmPool
from project.access.permissions import holds
from project.access.row_permissions import holds_sql
from project.api.viewsets import ScopedModelViewSet, ScopedViewSetMixin

ALLOCATE = "pools.allocate_vmpool"


class VmPoolViewSet(ScopedModelViewSet):
    """VM pools: identical VMs from one template, some kept running for instant use."""

    queryset = VmPool.objects.with_counts().with_takeable()
    serializer_class = VmPoolSerializer
    filterset_class = VmPoolFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id", "size", "created_at"]
    action_permissions = {"allocatevm": ALLOCATE}

    def get_queryset(self):
        if self.action != "allocatevm":
            return super().get_queryset()
        # Taking a VM needs the pool, not its counts (sub-selects over all its VMs); whether
        # the caller may see it and take from it is read in the same query, from the grants
        # on this pool and its cluster only.
        user, table = self.request.user, connection.ops.quote_name(VmPool._meta.db_table)
        return VmPool.objects.annotate(
            may_view=RawSQL(*holds_sql(VmPool, user, "pools.view_vmpool", table), BooleanField()),
            may_allocate=RawSQL(*holds_sql(VmPool, user, ALLOCATE, table), BooleanField()),
        )

    def check_object_permissions(self, request, obj) -> None:
        if self.action != "allocatevm":
            return super().check_object_permissions(request, obj)
        APIView.check_object_permissions(self, request, obj)  # the permission classes' own
        if not obj.may_view:
            raise Http404  # a pool the caller may not see does not exist for them
        if not obj.may_allocate:
            raise PermissionDenied(f"You may not {self._verb()} this {obj._meta.verbose_name}.")

    def filter_queryset(self, queryset):
        if self.action == "allocatevm":
            return queryset  # the URL names the pool; the list's filters have nothing to do
        return super().filter_queryset(queryset)

    def perform_create(self, serializer):
        pool = serializer.unsaved_instance()
        self.check_create_permission(pool)
        services.create_pool(pool)
        serializer.instance = self.queryset.all().get(pk=pool.pk)

    @extend_schema(responses=PoolUpdateResultSerializer)
    def update(self, request, *args, **kwargs):
        partial = kwargs.pop("partial", False)
        pool = self.get_object()
        serializer = self.get_serializer(pool, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        self.check_placement(serializer)
        warnings = services.update_pool(pool, dict(serializer.validated_data))
        data = self.get_serializer(self.queryset.all().get(pk=pool.pk)).data
        data["warnings"] = warnings
        return Response(data)

    @extend_schema(responses=PoolUpdateResultSerializer)
    def partial_update(self, request, *args, **kwargs):
        return super().partial_update(request, *args, **kwargs)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "force", OpenApiTypes.BOOL, description="Also stop and remove VMs users hold."
            )
        ]
    )
    def destroy(self, request, *args, **kwargs):
        """Delete the pool and its VMs; refused while users hold VMs unless ``force=true``."""
        pool = self.get_object()
        force = request.query_params.get("force", "").lower() in {"1", "true", "yes"}
        services.delete_pool(pool, force=force)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: PoolAllocationSerializer})
    @action(detail=True, methods=["post"])
    def allocatevm(self, request, pk=None):
        """Take a VM: a prestarted one at once, or one that is being started (see its job)."""
        pool = self.get_object()
        allocation = services.allocate_vm(pool, request.user)
        job = allocation.job
        if job is not None and job.state == JobState.PENDING:
            # A job journals from when it runs: a pending one has nothing to read.
            job._prefetched_objects_cache = {"journal": job.journal.none()}
        return Response(
            PoolAllocationSerializer(
                {"vm": allocation.vm, "job": job, "instant": allocation.instant},
                context=self.get_serializer_context(),
            ).data
        )


class VmReturnViewSet(ScopedViewSetMixin, viewsets.GenericViewSet):
    """Giving a pool's VM back: its user, or an admin of its pool."""

    queryset = VirtualMachine.objects.all()
    filter_backends: list = []  # the URL names the VM; no list parameters apply

    @extend_schema(request=None, responses={202: JobSerializer(many=True)})
    @action(detail=True, methods=["post"], url_path="return")
    def return_to_pool(self, request, pk=None):
        """Give the VM back to its pool (its user loses it; a stateless pool reverts it)."""
        vm = self.get_object()
        if vm.owner_id != request.user.pk and not holds(request.user, "pools.return_vmpool", vm):
            raise PermissionDenied("Only the VM's user or its pool's admin may return it.")
        queued = services.return_vm(vm, requested_by=request.user)
        return Response(JobSerializer(queued, many=True).data, status=status.HTTP_202_ACCEPTED)
