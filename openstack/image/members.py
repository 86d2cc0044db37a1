"""Glance's image members (``/v2/images/{id}/members[/{member_id}]``): a shared image offered
to a project, who accepts or rejects it. A member is a user's project (the user's id, as
Keystone here names it) or a group of Corral (``g`` and its id); the rules are
``hosts.image_access``'s.

A member may also be named by its user's name, the name of their project: Keystone refuses a
user the look-up of another's project, and ``openstack image add project IMAGE bob`` then
passes ``bob`` on as it was given."""

from __future__ import annotations

from datetime import UTC

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import status
from rest_framework.response import Response

from hosts import image_access
from hosts.models import Image, ImageMember
from openstack.image.base import GlanceRefusal, GlanceView
from openstack.image.queries import ImageNotFound, find_entry
from project.errors import Refused


def _time(moment) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def member_view(member: ImageMember) -> dict:
    return {
        "image_id": str(member.image.uuid),
        "member_id": member.member_id,
        "status": member.status,
        "created_at": _time(member.created_at),
        "updated_at": _time(member.updated_at),
        "schema": "/v2/schemas/member",
    }


def _image(request, image_id: str) -> Image:
    try:
        entry = find_entry(request.user, image_id)
    except ImageNotFound:
        raise GlanceRefusal(404, f"No image found with ID {image_id}") from None
    if entry.image is None:
        raise GlanceRefusal(403, "Only shared images have members.")
    return entry.image


def _managed(request, image: Image) -> Image:
    if not image_access.manages(request.user, image):
        raise GlanceRefusal(403, f"You are not permitted to modify members of image {image.uuid}.")
    return image


def _key(text: str) -> int | None:
    """A database id written in ``text``, if it is one (at most 18 digits: within a bigint)."""
    return int(text) if text.isdigit() and len(text) < 19 else None


def _principal(member_id: str, *, active: bool = False) -> dict | None:
    """The group (``g`` and its id) or the user (their project's id, or their name) a member
    id names; ``active``: only a user who may still log in."""
    users = get_user_model().objects.all()
    if active:
        users = users.filter(is_active=True)
    if member_id.startswith("g") and _key(member_id[1:]) is not None:
        group = Group.objects.filter(pk=_key(member_id[1:])).first()
        if group is not None:
            return {"group": group}
    user = None
    if _key(member_id) is not None:
        user = users.filter(pk=_key(member_id)).first()
    user = user or users.filter(username=member_id).first()
    return None if user is None else {"user": user}


def _lookup(image: Image, member_id: str) -> ImageMember | None:
    principal = _principal(member_id)
    return None if principal is None else image.members.filter(**principal).first()


def _seen_member(request, image: Image, member_id: str) -> ImageMember:
    """The member, to its image's managers and to the member itself; 404 to anyone else."""
    member = _lookup(image, member_id)
    if member is None or not (
        image_access.manages(request.user, image) or image_access.is_member(request.user, member)
    ):
        raise GlanceRefusal(404, f"{member_id} is not a member of image {image.uuid}.")
    return member


def _new_member(member_id) -> dict:
    principal = _principal(str(member_id), active=True)
    if principal is None:
        raise GlanceRefusal(
            400, f"No project {member_id}: a user's project id or name, or g and a group's id."
        )
    return principal


class MembersView(GlanceView):
    def get(self, request, image_id):
        image = _image(request, image_id)
        members = image.members.select_related("image")
        if not image_access.manages(request.user, image):
            members = [row for row in members if image_access.is_member(request.user, row)]
        return Response(
            {"members": [member_view(row) for row in members], "schema": "/v2/schemas/members"}
        )

    def post(self, request, image_id):
        image = _managed(request, _image(request, image_id))
        body = self.body()
        if not isinstance(body, dict) or "member" not in body:
            raise GlanceRefusal(400, 'The body names the member: {"member": "<project id>"}.')
        try:
            member = image_access.add_member(image, **_new_member(body["member"]))
        except Refused as refused:
            code = 409 if refused.code == "image_member_exists" else 403
            raise GlanceRefusal(code, refused.message) from None
        return Response(member_view(member))


class MemberView(GlanceView):
    def get(self, request, image_id, member_id):
        image = _image(request, image_id)
        return Response(member_view(_seen_member(request, image, member_id)))

    def put(self, request, image_id, member_id):
        image = _image(request, image_id)
        member = _seen_member(request, image, member_id)
        if not image_access.is_member(request.user, member):
            raise GlanceRefusal(403, "Only the member answers an image offered to it.")
        body = self.body()
        if not isinstance(body, dict) or body.get("status") not in (
            "pending",
            "accepted",
            "rejected",
        ):
            raise GlanceRefusal(400, "status: one of pending, accepted, rejected.")
        image_access.set_member_status(member, body["status"])
        return Response(member_view(member))

    def delete(self, request, image_id, member_id):
        image = _managed(request, _image(request, image_id))
        member = _lookup(image, member_id)
        if member is None:
            raise GlanceRefusal(404, f"{member_id} is not a member of image {image.uuid}.")
        member.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


def member_schema() -> dict:
    return {
        "name": "member",
        "properties": {
            "image_id": {"type": "string"},
            "member_id": {"type": "string"},
            "status": {"type": "string", "enum": ["pending", "accepted", "rejected"]},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
            "schema": {"type": "string", "readOnly": True},
        },
    }


class MemberSchemaView(GlanceView):
    def get(self, request):
        return Response(member_schema())


class MembersSchemaView(GlanceView):
    def get(self, request):
        return Response(
            {
                "name": "members",
                "properties": {
                    "members": {"type": "array", "items": member_schema()},
                    "schema": {"type": "string"},
                },
            }
        )
