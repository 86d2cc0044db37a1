"""``GET /api/me/quota/``: the caller's limit and use of each resource a quota limits, and
what their leases may reserve at once."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from hosts import quotas


class QuotaLineSerializer(serializers.Serializer):
    limit = serializers.IntegerField(
        allow_null=True, help_text="The caller's effective limit; null: unlimited."
    )
    used = serializers.IntegerField(
        help_text="What the caller holds now (image storage rounded up to a whole GB)."
    )


def _lease_limit(what: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        allow_null=True,
        help_text=f"{what} the caller's leases may reserve at once; null: unlimited.",
    )


class LeaseLimitsSerializer(serializers.Serializer):
    instances = _lease_limit("Instances (a whole host counts as one)")
    vcpus = _lease_limit("vCPUs")
    memory_mb = _lease_limit("Memory (MB)")


class MyQuotaSerializer(serializers.Serializer):
    """Each resource's limit and use (memory in MB, disk and image storage in GB; disk counts
    the VMs' disks and what their snapshots may come to hold), and what
    the caller's leases may reserve at once (counted over a lease's window)."""

    vms = QuotaLineSerializer()
    vcpus = QuotaLineSerializer()
    memory_mb = QuotaLineSerializer()
    disk_gb = QuotaLineSerializer()
    images = QuotaLineSerializer()
    image_gb = QuotaLineSerializer()
    snapshots = QuotaLineSerializer()
    leases = LeaseLimitsSerializer()


class MyQuotaView(APIView):
    """The caller's quota: for each resource, their effective limit (the most generous of
    their own, their groups' and the default; null for unlimited) and what they use, and the
    limits on what their leases reserve at once."""

    @extend_schema(responses=MyQuotaSerializer, operation_id="me_quota_retrieve")
    def get(self, request):
        lines = quotas.quota_of(request.user)
        data = {line.resource: {"limit": line.limit, "used": line.used} for line in lines}
        leases = quotas.lease_limits(request.user)
        data["leases"] = {name.removeprefix("lease_"): limit for name, limit in leases.items()}
        return Response(MyQuotaSerializer(data).data)
