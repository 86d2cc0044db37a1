"""Images API: multipart upload (streamed into the image store), list, show with per-host
copies, rename, change visibility, delete (refused while a template uses the image), and a
shared image's members. Who sees and manages which image is ``hosts.image_access``'s."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import parsers, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response

from hosts import image_access, images
from hosts.error_codes import HostErrorCode
from hosts.models import (
    Cluster,
    Image,
    ImageCopy,
    ImageFormat,
    ImageKind,
    ImageMember,
    ImageVisibility,
    MemberStatus,
)
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


MEMBER_ID = OpenApiParameter(
    "member_id", int, OpenApiParameter.PATH, description="The membership's id (`members/`)."
)


class ImageSerializer(ModelCleanSerializer):
    owner = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="Who uploaded and manages it; null: the admins'."
    )
    owner_name = serializers.CharField(source="owner.username", read_only=True, allow_null=True)
    visibility = serializers.ChoiceField(
        choices=ImageVisibility.choices,
        required=False,
        help_text="private (its owner), shared (and its accepted members), public (admins "
        "publish), community (anyone may use it; listed only when asked for).",
    )

    class Meta:
        model = Image
        fields = [
            "id",
            "name",
            "description",
            "cluster",
            "owner",
            "owner_name",
            "visibility",
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
    visibility = serializers.ChoiceField(
        choices=ImageVisibility.choices,
        required=False,
        help_text="Default: private, or public for an admin where the image is offered.",
    )
    file = serializers.FileField()

    def validate_name(self, name):
        if Image.objects.filter(name=name).exists():
            raise serializers.ValidationError("An image with this name exists already.")
        return name

    def validate_file(self, upload):
        if not isinstance(upload, images.StoredUpload):
            raise serializers.ValidationError("Send the file as multipart/form-data.")
        return upload


class ImageMemberSerializer(serializers.ModelSerializer):
    class Meta:
        model = ImageMember
        fields = ["id", "user", "group", "status", "created_at", "updated_at"]
        read_only_fields = ["status"]


class ImageMemberAddSerializer(serializers.Serializer):
    user = serializers.SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.filter(is_active=True),
        required=False,
        help_text="The username of the user offered the image.",
    )
    group = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Group.objects.all(),
        required=False,
        help_text="The name of the group offered the image.",
    )

    def validate(self, attrs):
        if ("user" in attrs) == ("group" in attrs):
            raise serializers.ValidationError("Name a user or a group (one of them).")
        return attrs


class ImageMemberStatusSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=MemberStatus.choices)


class ImageFilterSet(ScopedFilterSet):
    class Meta:
        model = Image
        fields = {
            "name": ["exact", "icontains"],
            "kind": ["exact"],
            "cluster": ["exact"],
            "visibility": ["exact"],
            "owner": ["exact"],
        }


class ImageViewSet(ScopedModelViewSet):
    """Images VMs boot from: disks (qcow2 or raw), kernels and initrds.

    Lists show what ``hosts.image_access.listed`` shows (``?visibility=community`` lists
    community images); an image the caller may not see is a 404. Its owner or an admin of its
    scope changes and deletes it; only admins make it public.
    """

    queryset = Image.objects.all()
    serializer_class = ImageSerializer
    filterset_class = ImageFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id", "size_bytes", "created_at"]
    parser_classes = [parsers.MultiPartParser, *ScopedModelViewSet.parser_classes]

    def get_queryset(self):
        everything = viewsets.ModelViewSet.get_queryset(self).select_related("owner")
        if self.action == "list":
            queryset = image_access.listed(
                self.request.user,
                everything,
                visibility=self.request.query_params.get("visibility") or None,
            )
        else:
            queryset = image_access.visible(self.request.user, everything)
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
        cluster = data.get("cluster")
        with transaction.atomic():
            if not image_access.may_upload(request.user, cluster):
                raise PermissionDenied(
                    f"You may not create an image in cluster {cluster}."
                    if cluster
                    else "You may not create an image."
                )
            visibility = data.get("visibility") or image_access.default_visibility(
                request.user, cluster
            )
            image_access.check_visibility(
                request.user, Image(cluster=cluster, visibility=""), visibility
            )
            image = images.create_image(
                data["file"],
                name=data["name"],
                kind=data["kind"],
                cluster=data.get("cluster"),
                description=data.get("description", ""),
                declared_format=data.get("format", ""),
                user=request.user,
                visibility=visibility,
            )
        return Response(ImageDetailSerializer(image).data, status=status.HTTP_201_CREATED)

    def check_object_permissions(self, request, obj) -> None:
        verb = {"update": "change", "partial_update": "change", "destroy": "delete"}.get(
            self.action
        )
        if verb is not None and not image_access.manages(request.user, obj, verb):
            raise PermissionDenied(f"You may not {verb} this image.")

    def perform_update(self, serializer) -> None:
        visibility = serializer.validated_data.pop("visibility", None)
        with transaction.atomic():
            self.check_placement(serializer)
            image = serializer.save()
            if visibility is not None:
                image_access.set_visibility(self.request.user, image, visibility)
        self.reload(serializer)

    def check_placement(self, serializer) -> None:
        # An owner keeps their image where it is offered; admins move images as before.
        if "cluster" in serializer.validated_data:
            super().check_placement(serializer)

    def perform_destroy(self, instance) -> None:
        images.delete_image(instance, requested_by=self.request.user)

    def _managed(self) -> Image:
        image = self.get_object()
        if not image_access.manages(self.request.user, image):
            raise PermissionDenied("Only the image's owner and admins change its members.")
        return image

    @extend_schema(methods=["GET"], request=None, responses={200: ImageMemberSerializer(many=True)})
    @extend_schema(
        methods=["POST"], request=ImageMemberAddSerializer, responses={201: ImageMemberSerializer}
    )
    @action(detail=True, methods=["get", "post"], url_path="members")
    def members(self, request, pk=None):
        """The users and groups a shared image is offered to (a member sees only its own
        row); ``POST`` offers it to one more (its owner or an admin; pending until accepted)."""
        if request.method == "POST":
            image = self._managed()
            body = ImageMemberAddSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            member = image_access.add_member(image, **body.validated_data)
            return Response(ImageMemberSerializer(member).data, status=status.HTTP_201_CREATED)
        image = self.get_object()
        rows = image.members.all()
        if not image_access.manages(request.user, image):
            rows = [row for row in rows if image_access.is_member(request.user, row)]
        return Response(ImageMemberSerializer(rows, many=True).data)

    def _member(self, image: Image, member_id) -> ImageMember:
        member = image.members.filter(pk=member_id).first() if str(member_id).isdigit() else None
        if member is None:
            raise NotFound("No such member of this image.")
        return member

    @extend_schema(
        methods=["PATCH"],
        request=ImageMemberStatusSerializer,
        responses=ImageMemberSerializer,
        parameters=[MEMBER_ID],
    )
    @extend_schema(methods=["DELETE"], request=None, responses={204: None}, parameters=[MEMBER_ID])
    @action(detail=True, methods=["patch", "delete"], url_path=r"members/(?P<member_id>[0-9]+)")
    def member(self, request, pk=None, member_id=None):
        """``PATCH``: a member accepts (or rejects) the image offered to it. ``DELETE``: its
        owner or an admin takes the offer back."""
        if request.method == "DELETE":
            self._member(self._managed(), member_id).delete()
            return Response(status=status.HTTP_204_NO_CONTENT)
        image = self.get_object()  # a 404 for who may not see it, whatever they sent
        body = ImageMemberStatusSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        member = self._member(image, member_id)
        if not image_access.is_member(request.user, member):
            raise PermissionDenied("Only the member answers an offer.")
        image_access.set_member_status(member, body.validated_data["status"])
        return Response(ImageMemberSerializer(member).data)
