"""Glance's Image API v2 views: versions, images (list, create, show, change, delete), their
data (upload, download) and the image schemas.

The permissions are Corral's, as /api/images/ checks them (``hosts.image_access``): an image
the caller may not see is "not found"; whoever may create VMs somewhere creates images (in no
cluster, where Glance's images go; private unless an admin's), their owner or an admin of
their scope changes and deletes them, only admins make one public. A queued image is its
owner's alone. Members (``/v2/images/{id}/members``) are in members.py, the caller's quota
usage (``/v2/info/usage``) in discovery.py.
"""

from __future__ import annotations

from django.conf import settings
from django.http import FileResponse
from rest_framework import status
from rest_framework.response import Response

from hosts import image_access
from hosts import images as corral_images
from openstack.identity.catalog import base_url
from openstack.image import bodies, listing, services
from openstack.image.base import GlanceRefusal, GlanceView
from openstack.image.presenters import image_view
from openstack.image.queries import Entry, ImageNotFound, find_entry
from openstack.image.schemas import image_schema, images_schema
from project.api.parsers import JSONParser

# Glance's API versions: the current one, and those it still answers (the same API here).
VERSIONS = ["2.17", "2.16", "2.15", "2.9", "2.7", "2.6", "2.5", "2.4", "2.3", "2.2", "2.1", "2.0"]
PATCH_MEDIA_TYPE = "application/openstack-images-v2.1-json-patch"


class JSONPatchParser(JSONParser):
    media_type = PATCH_MEDIA_TYPE


class VersionsView(GlanceView):
    """``GET /image``, ``/image/versions``, ``/image/v2``: the versions (no token needed)."""

    authentication_classes = []
    permission_classes = []

    def get(self, request):
        href = f"{base_url(request)}/image/v2/"
        return Response(
            {
                "versions": [
                    {
                        "id": f"v{version}",
                        "status": "CURRENT" if index == 0 else "SUPPORTED",
                        "links": [{"rel": "self", "href": href}],
                    }
                    for index, version in enumerate(VERSIONS)
                ]
            }
        )


def _entry(request, image_id: str) -> Entry:
    try:
        return find_entry(request.user, image_id)
    except ImageNotFound:
        raise GlanceRefusal(404, f"No image found with ID {image_id}") from None


def _check(request, entry: Entry, verb: str) -> None:
    """Refuse ``verb`` (change, delete) on an image the caller sees but may not act on."""
    if entry.image is not None and not image_access.manages(request.user, entry.image, verb):
        raise GlanceRefusal(403, f"You may not {verb} image {entry.name}.")


def _check_upload(request) -> None:
    if not image_access.may_upload(request.user):
        raise GlanceRefusal(403, "You may not create images.")


class ImagesView(GlanceView):
    def get(self, request):
        return Response(listing.list_images(request.user, request.query_params))

    def post(self, request):
        _check_upload(request)
        fields = bodies.image_fields(self.body(), owner_id=str(request.user.pk))
        glance = services.queue_image(request.user, fields)
        return Response(image_view(Entry(None, glance)), status=status.HTTP_201_CREATED)


class ImageView(GlanceView):
    parser_classes = [JSONPatchParser, JSONParser]

    def get(self, request, image_id):
        return Response(image_view(_entry(request, image_id)))

    def patch(self, request, image_id):
        entry = _entry(request, image_id)
        _check(request, entry, "change")
        if request.content_type.split(";")[0].strip() != PATCH_MEDIA_TYPE:
            raise GlanceRefusal(415, f"Send the changes as {PATCH_MEDIA_TYPE}.")
        document = bodies.apply_patch(
            services.settable_fields(entry), self.body(), queued=entry.image is None
        )
        fields = bodies.image_fields(document, owner_id=entry.owner or "")
        services.update_entry(entry, fields, request.user)
        return Response(image_view(_entry(request, image_id)))

    def delete(self, request, image_id):
        entry = _entry(request, image_id)
        _check(request, entry, "delete")
        services.delete_entry(entry, request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ImageFileView(GlanceView):
    """``PUT``: the image's data, streamed into the image store. ``GET``: the data back."""

    streams_body = True

    def put(self, request, image_id):
        entry = _entry(request, image_id)
        if entry.image is not None:
            raise GlanceRefusal(
                409, f"Image status transition from {entry.status} to saving is not allowed"
            )
        _check_upload(request)
        if request.content_type.split(";")[0].strip() != "application/octet-stream":
            raise GlanceRefusal(415, "Send the image's data as application/octet-stream.")
        for header in ("CONTENT_LENGTH", "HTTP_X_OPENSTACK_IMAGE_SIZE"):
            announced = request.META.get(header, "")
            if announced.isdigit() and int(announced) > settings.CORRAL_IMAGE_MAX_BYTES:
                raise GlanceRefusal(
                    413, f"The image is over the limit of {corral_images.limit_text()}."
                )
        services.upload_data(entry.glance, request._request, request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def get(self, request, image_id):
        entry = _entry(request, image_id)
        if not entry.has_data:
            return Response(status=status.HTTP_204_NO_CONTENT)
        image = corral_images.ensure_digests(entry.image)
        try:
            data = open(corral_images.image_path(image), "rb")  # noqa: SIM115 - the response closes it
        except OSError:
            raise GlanceRefusal(404, f"The data of image {entry.id} is missing.") from None
        response = FileResponse(data, content_type="application/octet-stream")
        if image.md5:
            response["Content-MD5"] = image.md5
        return response


class ImageSchemaView(GlanceView):
    def get(self, request):
        return Response(image_schema())


class ImagesSchemaView(GlanceView):
    def get(self, request):
        return Response(images_schema())
