"""API for the caller's own SSH public keys (``/api/me/sshkeys/``): list, add, show, delete.

Each user sees only their own keys; another user's key does not exist for them (404).
"""

from django.http import Http404
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from project import sshkeys
from project.models import SshKey


class SshKeySerializer(serializers.ModelSerializer):
    name = serializers.CharField(max_length=64)
    public_key = serializers.CharField(max_length=16384, trim_whitespace=True)

    class Meta:
        model = SshKey
        fields = ["id", "name", "public_key", "fingerprint", "created_at"]
        read_only_fields = ["id", "fingerprint", "created_at"]


class SshKeyViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """The caller's SSH public keys, put on each VM they are handed (cloud-init)."""

    queryset = SshKey.objects.all()
    serializer_class = SshKeySerializer
    ordering_fields = ["name", "id", "created_at"]
    search_fields = ["name", "fingerprint"]

    def get_queryset(self):
        return SshKey.objects.filter(owner=self.request.user).order_by("name", "pk")

    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key = sshkeys.add_key(
            request.user, serializer.validated_data["name"], serializer.validated_data["public_key"]
        )
        return Response(self.get_serializer(key).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, pk=None):
        if not str(pk).isdigit() or not sshkeys.delete_key(request.user, int(pk)):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)
