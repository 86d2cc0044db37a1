"""``POST /api/vms/{id}/image/``: an image of the VM's disk as it is now, made by a job on the
VM's queue (``hosts.vm_images``). Its holder and whoever may operate it ask; anyone else gets
a 404."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from hosts import vm_images
from hosts.api.images import ImageSerializer
from hosts.api.serializers import JobSerializer
from hosts.models import ImageVisibility, Job
from project.names import validate_object_name


class ImageFromVmSerializer(serializers.Serializer):
    name = serializers.CharField(
        max_length=64, validators=[validate_object_name], help_text="The new image's name."
    )
    visibility = serializers.ChoiceField(
        choices=ImageVisibility.choices,
        required=False,
        help_text="Default: private (only admins make an image public).",
    )
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)


class ImageJobSerializer(JobSerializer):
    """The job that makes an image of a VM, and the image, ``saving`` until the job ends."""

    image = serializers.SerializerMethodField(
        help_text="The image being made: status saving (no file, nothing boots from it yet), "
        "ready once the job succeeded; gone if the job fails or is cancelled."
    )

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "image"]
        read_only_fields = fields

    @extend_schema_field(ImageSerializer)
    def get_image(self, job: Job) -> dict:
        return ImageSerializer(self.context["image"]).data


class VirtualMachineImage:
    """An image made of the VM's disk."""

    @extend_schema(request=ImageFromVmSerializer, responses={202: ImageJobSerializer})
    @action(detail=True, methods=["post"])
    def image(self, request, pk=None):
        """Make an image of the VM's disk as it is now, yours and private unless asked
        otherwise, counted in your image quota. A running VM whose template has the guest
        agent is copied live, its filesystems frozen for an instant; one without is shut down
        for the copy and started again after (the job's journal says so). The result is a
        standalone qcow2 disk image that boots new VMs like any image. 202 with the job and the
        image (saving until the job has made it)."""
        vm = self.get_object()
        if not vm_images.may_make_image(request.user, vm):
            raise Http404
        body = ImageFromVmSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job, image = vm_images.request_image(vm, requested_by=request.user, **body.validated_data)
        context = {**self.get_serializer_context(), "image": image}
        return Response(ImageJobSerializer(job, context=context).data, status.HTTP_202_ACCEPTED)
