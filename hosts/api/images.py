"""Images API: multipart upload (streamed into the image store), list, show with per-host
copies, rename, delete (refused while a template uses the image)."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import parsers, serializers, status
from rest_framework.response import Response

from hosts import images
from hosts.error_codes import HostErrorCode
from hosts.models import Cluster, Image, ImageCopy, ImageFormat, ImageKind
from project.api.serializers import ModelCleanSerializer, ScopedRelatedField
from project.api.viewsets import ScopedModelViewSet
from project.errors import Refused
from project.filters import ScopedFilterSet
from project.names import validate_object_name


class ImageCopySerializer(serializers.ModelSerializer):
    host_name = serializers.CharField(source="host.name", read_only=True)

    class Meta:
        model = ImageCopy
        fields = ["host", "host_name", "state", "error", "updated_at"]


class ImageSerializer(ModelCleanSerializer):
    class Meta:
        model = Image
        fields = [
            "id",
            "name",
            "description",
            "cluster",
            "kind",
            "format",
            "size_bytes",
            "virtual_size_bytes",
            "sha256",
            "status",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["kind"]


class ImageDetailSerializer(ImageSerializer):
    copies = ImageCopySerializer(many=True, read_only=True)

    class Meta(ImageSerializer.Meta):
        fields = [*ImageSerializer.Meta.fields, "copies"]


class ImageUploadSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, validators=[validate_object_name])
    kind = serializers.ChoiceField(choices=ImageKind.choices)
    format = serializers.ChoiceField(
        choices=ImageFormat.choices,
        required=False,
        help_text="Optional: the format the file must have (it is read from the content).",
    )
    cluster = ScopedRelatedField(queryset=Cluster.objects.all(), required=False, allow_null=True)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    file = serializers.FileField()

    def validate_name(self, name):
        if Image.objects.filter(name=name).exists():
            raise serializers.ValidationError("An image with this name exists already.")
        return name

    def validate_file(self, upload):
        if not isinstance(upload, images.StoredUpload):
            raise serializers.ValidationError("Send the file as multipart/form-data.")
        return upload


class ImageFilterSet(ScopedFilterSet):
    class Meta:
        model = Image
        fields = {"name": ["exact", "icontains"], "kind": ["exact"], "cluster": ["exact"]}


class ImageViewSet(ScopedModelViewSet):
    """Images VMs boot from: disks (qcow2 or raw), kernels and initrds."""

    queryset = Image.objects.all()
    serializer_class = ImageSerializer
    filterset_class = ImageFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id", "size_bytes", "created_at"]
    parser_classes = [parsers.MultiPartParser, *ScopedModelViewSet.parser_classes]

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("copies__host")
        return queryset

    def get_serializer_class(self):
        return ImageDetailSerializer if self.action == "retrieve" else ImageSerializer

    def initialize_request(self, request, *args, **kwargs):
        # Before anything reads the body: uploads go straight to the image store.
        self.upload_handler = images.ImageUploadHandler(request)
        request.upload_handlers = [self.upload_handler]
        return super().initialize_request(request, *args, **kwargs)

    def finalize_response(self, request, response, *args, **kwargs):
        # Whatever an upload left that create_image did not keep (any method, any outcome).
        handler = getattr(self, "upload_handler", None)
        if handler is not None:
            handler.discard_all()
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(request={"multipart/form-data": ImageUploadSerializer})
    def create(self, request, *args, **kwargs):
        return self._create(request)

    def _create(self, request):
        body = request.data  # parses the body: the upload handler runs here
        if self.upload_handler.too_big:
            raise Refused(
                HostErrorCode.IMAGE_TOO_BIG,
                f"The file is over the limit of {images.limit_text()}.",
                field="file",
            )
        upload = ImageUploadSerializer(data=body, context=self.get_serializer_context())
        upload.is_valid(raise_exception=True)
        data = upload.validated_data
        with transaction.atomic():
            self.check_create_permission(Image(name=data["name"], cluster=data.get("cluster")))
            image = images.create_image(
                data["file"],
                name=data["name"],
                kind=data["kind"],
                cluster=data.get("cluster"),
                description=data.get("description", ""),
                declared_format=data.get("format", ""),
                user=request.user,
            )
        return Response(ImageDetailSerializer(image).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance) -> None:
        images.delete_image(instance, requested_by=self.request.user)
