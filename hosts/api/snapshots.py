"""A VM's snapshots in the API: ``GET``/``POST /api/vms/{id}/snapshots/``,
``GET``/``DELETE /api/vms/{id}/snapshots/{sid}/`` and ``POST .../{sid}/revert/``; each change
answers 202 with the job that makes it. Only whoever may operate the VM (its holder among
them) sees them: for anyone else they do not exist (404)."""

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from hosts import snapshots
from hosts.api.serializers import JobSerializer
from hosts.guests.consoles import OPERATE
from hosts.models import VmSnapshot
from project.access.permissions import holds
from project.names import validate_object_name

SID = OpenApiParameter("sid", int, OpenApiParameter.PATH, description="The snapshot's id.")


class VmSnapshotSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(
        choices=VmSnapshot._meta.get_field("status").choices,
        read_only=True,
        help_text="taking, ready (it may be reverted to or deleted), or deleting.",
    )
    current = serializers.BooleanField(
        read_only=True, help_text="The snapshot the VM was last taken at or reverted to."
    )
    size_bytes = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="What taking it added to the VM's disk on its host; null: not known.",
    )
    owner = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        help_text="Whose quota it counts against (the VM's holder when it was taken).",
    )

    class Meta:
        model = VmSnapshot
        fields = [
            "id",
            "vm",
            "name",
            "description",
            "memory",
            "status",
            "current",
            "size_bytes",
            "owner",
            "created_at",
        ]
        read_only_fields = fields


class NewSnapshotSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, validators=[validate_object_name])
    description = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, default=""
    )
    memory = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Save the running VM's memory and state too: a revert resumes it where it "
        "was. Without, a revert leaves the VM shut off with the snapshot's disk.",
    )


class SnapshotJobSerializer(serializers.Serializer):
    snapshot = VmSnapshotSerializer()
    job = JobSerializer()


class VirtualMachineSnapshots:
    """The VM viewset's snapshot actions."""

    def _operated_vm(self, request):
        vm = self.get_object()
        if not holds(request.user, OPERATE, vm):
            raise Http404
        return vm

    def _snapshot(self, request, sid):
        vm = self._operated_vm(request)
        snapshot = VmSnapshot.objects.select_related("owner").filter(pk=sid, vm=vm).first()
        if snapshot is None:
            raise Http404
        snapshot.vm = vm
        return snapshot

    @extend_schema(methods=["GET"], responses=VmSnapshotSerializer(many=True))
    @extend_schema(
        methods=["POST"], request=NewSnapshotSerializer, responses={202: SnapshotJobSerializer}
    )
    @action(detail=True, methods=["get", "post"], url_path="snapshots")
    def snapshots(self, request, pk=None):
        """The VM's snapshots, oldest first (GET); take one (POST: 202 with the snapshot, being
        taken, and the job that takes it)."""
        vm = self._operated_vm(request)
        if request.method == "GET":
            listed = VmSnapshot.objects.filter(vm=vm).select_related("owner")
            return Response(VmSnapshotSerializer(listed, many=True).data)
        body = NewSnapshotSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        snapshot, job = snapshots.take(vm, **body.validated_data, requested_by=request.user)
        data = {"snapshot": VmSnapshotSerializer(snapshot).data, "job": JobSerializer(job).data}
        return Response(data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(methods=["GET"], parameters=[SID], responses=VmSnapshotSerializer)
    @extend_schema(methods=["DELETE"], parameters=[SID], responses={202: JobSerializer})
    @action(detail=True, methods=["get", "delete"], url_path=r"snapshots/(?P<sid>[0-9]+)")
    def snapshot(self, request, pk=None, sid=None):
        """One snapshot (GET); delete it (DELETE: 202 with the job that deletes it)."""
        snapshot = self._snapshot(request, sid)
        if request.method == "GET":
            return Response(VmSnapshotSerializer(snapshot).data)
        job = snapshots.delete(snapshot, requested_by=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[SID], request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"], url_path=r"snapshots/(?P<sid>[0-9]+)/revert")
    def revert_snapshot(self, request, pk=None, sid=None):
        """Bring the VM back to the snapshot: its disk, and with a memory snapshot its memory
        and running state (it resumes where it was); a disk-only snapshot leaves it shut off.
        202 with the job."""
        snapshot = self._snapshot(request, sid)
        job = snapshots.revert(snapshot, requested_by=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
