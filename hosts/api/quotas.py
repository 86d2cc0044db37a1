"""``GET /api/me/quota/``: the caller's limit and use of each resource a quota limits."""

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


class MyQuotaSerializer(serializers.Serializer):
    """Each resource's limit and use (memory in MB, disk and image storage in GB)."""

    vms = QuotaLineSerializer()
    vcpus = QuotaLineSerializer()
    memory_mb = QuotaLineSerializer()
    disk_gb = QuotaLineSerializer()
    images = QuotaLineSerializer()
    image_gb = QuotaLineSerializer()


class MyQuotaView(APIView):
    """The caller's quota: for each resource, their effective limit (the most generous of
    their own, their groups' and the default; null for unlimited) and what they use."""

    @extend_schema(responses=MyQuotaSerializer, operation_id="me_quota_retrieve")
    def get(self, request):
        lines = quotas.quota_of(request.user)
        data = {line.resource: {"limit": line.limit, "used": line.used} for line in lines}
        return Response(MyQuotaSerializer(data).data)
