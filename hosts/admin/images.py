"""Admin screens for images: what was uploaded, and where each image has been copied."""

from django.contrib import admin, messages

from hosts import image_access, images
from hosts.admin.clusters import ONLY_VISIBLE
from hosts.models import Image, ImageCopy
from project.admin.base import LabelledTabularInline, ScopedAdmin
from project.errors import Refused


class ImageCopyInline(LabelledTabularInline):
    model = ImageCopy
    fields = ["host", "state", "error", "path", "updated_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Image)
class ImageAdmin(ScopedAdmin):
    """Images are uploaded through the API (``POST /api/images/``, streamed); here they are
    seen, renamed, described and deleted."""

    list_display = [
        "name",
        "kind",
        "format",
        "size_bytes",
        "cluster",
        "owner",
        "visibility",
        "status",
        "created_at",
    ]
    list_filter = ["kind", "format", "visibility", ("cluster", ONLY_VISIBLE)]
    search_fields = ["name", "description", "sha256"]
    fields = [
        "name",
        "description",
        "cluster",
        "owner",
        "visibility",
        "kind",
        "format",
        "size_bytes",
        "virtual_size_bytes",
        "sha256",
        "status",
        "created_at",
    ]
    readonly_fields = [
        "owner",
        "visibility",
        "kind",
        "format",
        "size_bytes",
        "virtual_size_bytes",
        "sha256",
        "status",
        "created_at",
    ]
    list_select_related = ["cluster", "owner"]
    inlines = [ImageCopyInline]

    def get_queryset(self, request):
        return image_access.visible(request.user, super(ScopedAdmin, self).get_queryset(request))

    def has_add_permission(self, request):
        return False

    def delete_model(self, request, obj):
        try:
            images.delete_image(obj, requested_by=request.user)
        except Refused as refused:
            self.message_user(request, refused.message, messages.ERROR)

    def delete_queryset(self, request, queryset):
        for image in queryset:
            self.delete_model(request, image)
