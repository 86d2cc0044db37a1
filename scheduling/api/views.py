"""Scheduling API, as oVirt's scheduler spec lists it: policies (with their filters, weights
and balancer), policy units, affinity groups, and the balancer's dry run."""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from hosts.models import Cluster
from project.access.permissions import holds, holds_at_system, restrict
from project.api.viewsets import ScopedModelViewSet, ScopedViewSetMixin
from project.errors import Refused
from scheduling import services
from scheduling.api.filtersets import AffinityGroupFilterSet, PolicyFilterSet, PolicyUnitFilterSet
from scheduling.api.serializers import (
    AffinityGroupSerializer,
    BalancePreviewSerializer,
    ClonePolicySerializer,
    PolicyBalanceSerializer,
    PolicyFilterSerializer,
    PolicySerializer,
    PolicyUnitSerializer,
    PolicyWeightSerializer,
)
from scheduling.balancer import balance_cluster
from scheduling.error_codes import SchedulingErrorCode
from scheduling.models import AffinityGroup, Policy, PolicyFilter, PolicyUnit, PolicyWeight


def _as_drf(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except DjangoPermissionDenied as exc:
        raise PermissionDenied(str(exc)) from exc
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)


class PolicyUnitViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Policy units: built-in and user-written filters, weights and balancers. Everyone signed
    in reads them; a system-wide PolicyAdmin enables or disables them and says what a failing
    filter does (``PATCH``)."""

    queryset = PolicyUnit.objects.all()
    serializer_class = PolicyUnitSerializer
    filterset_class = PolicyUnitFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id"]
    # A unit's other fields come from its code: only PATCH changes what may change.
    http_method_names = ["get", "patch", "delete", "head", "options"]

    def perform_update(self, serializer):
        if not holds_at_system(self.request.user, "scheduling.change_policyunit"):
            raise PermissionDenied(
                "Changing a policy unit needs PolicyAdmin on the whole system: every policy "
                "of every cluster may use it."
            )
        with transaction.atomic():
            serializer.save()

    def perform_destroy(self, unit):
        if unit.internal:
            raise PermissionDenied("Built-in units cannot be removed.")
        if not holds_at_system(self.request.user, "scheduling.delete_policyunit"):
            raise PermissionDenied("You may not remove policy units.")
        in_use = (
            PolicyFilter.objects.filter(unit=unit).exists()
            or PolicyWeight.objects.filter(unit=unit).exists()
            or Policy.objects.filter(balance=unit).exists()
        )
        if in_use:
            raise Refused(
                SchedulingErrorCode.UNIT_IN_USE,
                f"Unit {unit.name} is used by a policy; remove it from there first.",
            )
        unit.delete()


class PolicyViewSet(viewsets.ModelViewSet):
    """Cluster scheduling policies. Everyone may read them; built-in ones are locked."""

    queryset = Policy.objects.select_related("balance").prefetch_related(
        Prefetch("filters", queryset=PolicyFilter.objects.select_related("unit")),
        Prefetch("weights", queryset=PolicyWeight.objects.select_related("unit")),
    )
    serializer_class = PolicySerializer
    filterset_class = PolicyFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id"]

    def get_queryset(self):
        # A policy names only the clusters using it that the caller may see.
        visible = restrict(
            Cluster.objects.only("pk", "policy_id"), self.request.user, "hosts.view_cluster"
        )
        return super().get_queryset().prefetch_related(Prefetch("clusters", queryset=visible))

    def perform_create(self, serializer):
        if not holds(self.request.user, "scheduling.add_policy"):
            raise PermissionDenied("Creating a policy needs PolicyAdmin on a cluster or higher.")
        serializer.save()

    def perform_update(self, serializer):
        _as_drf(services.check_may_change, self.request.user, serializer.instance)
        with transaction.atomic():
            serializer.save()

    def perform_destroy(self, policy):
        _as_drf(services.check_may_change, self.request.user, policy)
        if Cluster.objects.filter(policy=policy).exists() or policy.is_default:
            raise Refused(
                SchedulingErrorCode.POLICY_IN_USE,
                f"Policy {policy.name} is in use; give its clusters another first.",
            )
        policy.delete()

    @extend_schema(request=ClonePolicySerializer, responses={201: PolicySerializer})
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        """A new, unlocked copy of this policy, to change."""
        policy = self.get_object()
        if not holds(request.user, "scheduling.add_policy"):
            raise PermissionDenied("Creating a policy needs PolicyAdmin on a cluster or higher.")
        body = ClonePolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        copy = _as_drf(services.clone, policy, **body.validated_data)
        return Response(
            PolicySerializer(self.get_queryset().get(pk=copy.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=None, responses=PolicySerializer)
    @action(detail=True, methods=["post"], url_path="make-default")
    def make_default(self, request, pk=None):
        """Use this policy for every cluster that does not choose one."""
        policy = self.get_object()
        if not holds_at_system(request.user, "scheduling.change_policy"):
            raise PermissionDenied("Choosing the default policy needs a system-wide PolicyAdmin.")
        services.make_default(policy)
        return Response(PolicySerializer(self.get_queryset().get(pk=policy.pk)).data)


class _PolicyPartViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """A policy's filters or weights: list, add, get, delete (editing the policy)."""

    pagination_class = None
    filter_backends = []

    def policy(self) -> Policy:
        return get_object_or_404(Policy, pk=self.kwargs["policy_pk"])

    def get_queryset(self):
        return self.model.objects.filter(policy=self.policy()).select_related("unit")

    def perform_create(self, serializer):
        policy = self.policy()
        _as_drf(services.check_may_change, self.request.user, policy)
        unit = serializer.validated_data["unit"]
        if self.model.objects.filter(policy=policy, unit=unit).exists():
            raise Refused(
                SchedulingErrorCode.UNIT_IN_POLICY,
                f"{unit.name} is in policy {policy.name} already.",
            )
        serializer.save(policy=policy)

    def perform_destroy(self, part):
        _as_drf(services.check_may_change, self.request.user, part.policy)
        part.delete()


class PolicyFilterViewSet(_PolicyPartViewSet):
    model = PolicyFilter
    serializer_class = PolicyFilterSerializer


class PolicyWeightViewSet(_PolicyPartViewSet):
    model = PolicyWeight
    serializer_class = PolicyWeightSerializer


class PolicyBalanceViewSet(viewsets.ViewSet):
    """A policy's balancer (at most one): list, add, get, delete."""

    serializer_class = PolicyBalanceSerializer

    def _policy(self, policy_pk) -> Policy:
        return get_object_or_404(Policy.objects.select_related("balance"), pk=policy_pk)

    def list(self, request, policy_pk=None):
        policy = self._policy(policy_pk)
        return Response([PolicyBalanceSerializer(policy).data] if policy.balance_id else [])

    def retrieve(self, request, policy_pk=None, pk=None):
        policy = self._policy(policy_pk)
        if str(policy.balance_id) != str(pk):
            raise NotFound("That unit is not this policy's balancer.")
        return Response(PolicyBalanceSerializer(policy).data)

    def create(self, request, policy_pk=None):
        policy = self._policy(policy_pk)
        _as_drf(services.check_may_change, request.user, policy)
        body = PolicyBalanceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if policy.balance_id is not None:
            raise Refused(
                SchedulingErrorCode.BALANCER_EXISTS,
                f"Policy {policy.name} has a balancer; delete it first (one at most).",
            )
        policy.balance = body.validated_data["unit"]
        policy.save(update_fields=["balance", "updated_at"])
        return Response(PolicyBalanceSerializer(policy).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, policy_pk=None, pk=None):
        policy = self._policy(policy_pk)
        if str(policy.balance_id) != str(pk):
            raise NotFound("That unit is not this policy's balancer.")
        _as_drf(services.check_may_change, request.user, policy)
        policy.balance = None
        policy.save(update_fields=["balance", "updated_at"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class AffinityGroupViewSet(ScopedModelViewSet):
    """Affinity groups: VMs (and hosts) to keep together or apart, strictly or softly."""

    queryset = AffinityGroup.objects.prefetch_related("vms", "hosts")
    serializer_class = AffinityGroupSerializer
    filterset_class = AffinityGroupFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id"]


class ClusterBalanceViewSet(ScopedViewSetMixin, viewsets.GenericViewSet):
    """The balancer's dry run on a cluster the caller may see."""

    queryset = Cluster.objects.all()
    filter_backends: list = []  # the URL names the cluster; no list parameters apply

    @extend_schema(responses=BalancePreviewSerializer)
    @action(detail=True, methods=["get"])
    def balance(self, request, pk=None):
        """What the cluster's balancer would do now (a dry run: nothing moves)."""
        cluster = self.get_object()
        return Response(balance_cluster(cluster.pk, dry_run=True))
