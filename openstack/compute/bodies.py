"""Nova's request bodies, read and checked as Nova checks them (a 400 naming the field): a
server's name and metadata, a ``POST /servers`` body as a whole (``ServerRequest``, the
``LaunchSpec`` launch.py makes servers from), a server group's name and policy, a key pair's
name."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from rest_framework.exceptions import ValidationError

from hosts.models import Cluster, Image
from openstack.compute import queries
from openstack.compute.base import NovaView
from openstack.compute.queries import Flavor, find_flavor, find_group, zones_of
from openstack.image.queries import ImageNotActive, ImageNotFound, find_image
from project.models import SshKey

MAX_METADATA = 128
# Nova's schema for a key pair's name (parameter_types.keypair_name_special_chars).
NOVA_NAME = re.compile(r"[_\- a-zA-Z0-9]+")
NOVA_NAME_MAX = 255
CORRAL_NAME_MAX = SshKey._meta.get_field("name").max_length


def server_name(value) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise ValidationError({"name": "A name of 1 to 255 characters, not only spaces."})
    return value


def check_metadata(value, field: str = "metadata") -> dict:
    """A server's metadata: at most 128 items, keys and values strings of 1 to 255."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError({field: "An object of string keys and values."})
    if len(value) > MAX_METADATA:
        raise ValidationError({field: f"At most {MAX_METADATA} items (quota exceeded)."})
    for key, item in value.items():
        if not key or len(key) > 255 or not isinstance(item, str) or len(item) > 255:
            raise ValidationError({field: f"Key {key!r}: keys and values are 1 to 255 characters."})
    return value


def image_request(value) -> tuple[str, dict]:
    """``createImage``'s argument: the image's name (1 to 255 characters, not only spaces) and
    its metadata (as a server's)."""
    if not isinstance(value, dict):
        raise ValidationError({"createImage": "An object naming the image (and its metadata)."})
    unknown = sorted(set(value) - {"name", "metadata"})
    if unknown:
        raise ValidationError({"createImage": f"Unknown members: {', '.join(unknown)}."})
    return server_name(value.get("name")), check_metadata(value.get("metadata"))


def checked_group_name(value) -> str:
    """Nova's rule for a server group's name: 1 to 255 printable characters, no space at
    either end."""
    if not isinstance(value, str) or not 1 <= len(value) <= 255:
        raise ValidationError({"name": "A server group's name is 1 to 255 characters."})
    if value != value.strip() or not value.isprintable():
        raise ValidationError(
            {"name": "A server group's name is printable, with no space at either end."}
        )
    return value


def checked_policy(view: NovaView, value) -> str:
    allowed = ["anti-affinity", "affinity"]
    if view.at_least(2, 15):
        allowed += ["soft-anti-affinity", "soft-affinity"]
    if not isinstance(value, list) or len(value) != 1 or value[0] not in allowed:
        raise ValidationError(
            {"policies": f"Give one policy in a list, one of: {', '.join(allowed)}."}
        )
    return value[0]


def checked_name(value) -> str:
    """A name Nova accepts and Corral can keep (400 naming ``name`` otherwise)."""
    if not isinstance(value, str):
        raise ValidationError({"name": "A key pair's name is a string."})
    if not value or len(value) > NOVA_NAME_MAX or not NOVA_NAME.fullmatch(value):
        raise ValidationError(
            {"name": "Use 1 to 255 letters, digits, spaces, '_' and '-' in a key pair's name."}
        )
    if value != value.strip():
        raise ValidationError({"name": "A key pair's name may not start or end with a space."})
    if len(value) > CORRAL_NAME_MAX:
        raise ValidationError(
            {"name": f"Corral keeps key pair names of at most {CORRAL_NAME_MAX} characters."}
        )
    return value


MAX_USER_DATA = 65535  # Nova's limit on the base64 text


@dataclass
class LaunchSpec:
    name: str
    flavor: Flavor
    image: Image | None
    image_ref: str
    key_name: str
    user_data: str
    metadata: dict
    count: int
    min_count: int
    cluster: Cluster | None
    zone: str
    config_drive: bool
    description: str | None
    group: object
    return_reservation_id: bool
    request: object


class ServerRequest:
    """A ``POST /servers`` body read and checked, field by field (Nova's 400s)."""

    def __init__(self, view: NovaView, user) -> None:
        self.view, self.user = view, user

    def read(self, body: dict) -> LaunchSpec:
        name = server_name(body.get("name"))
        if "flavorRef" not in body:
            raise ValidationError({"flavorRef": "'flavorRef' is a required property."})
        flavor = find_flavor(self.user, body["flavorRef"])
        if flavor is None:
            raise ValidationError(
                {"flavorRef": f"Flavor {queries.reference(body['flavorRef'])} could not be found."}
            )
        image_ref = queries.reference(body.get("imageRef") or "")
        image = self.image(image_ref) if image_ref else None
        networks = body.get("networks")
        if self.view.at_least(2, 37) and networks is None:
            raise ValidationError({"networks": "'networks' is a required property."})
        if (
            networks is not None
            and networks not in ("auto", "none")
            and not isinstance(networks, list)
        ):
            raise ValidationError({"networks": "'auto', 'none' or a list of networks."})
        return LaunchSpec(
            name=name,
            flavor=flavor,
            image=image,
            image_ref=image_ref,
            key_name=self.key_name(body.get("key_name")),
            user_data=self.user_data(body.get("user_data")),
            metadata=self.metadata(body.get("metadata")),
            count=self.count(body, "max_count", 1),
            min_count=self.count(body, "min_count", 1),
            cluster=self.zone(body.get("availability_zone")),
            zone=body.get("availability_zone") or "",
            config_drive=body.get("config_drive") in (True, "true", "True", "1", 1),
            description=body.get("description"),
            group=self.group(self.view.request.data.get("os:scheduler_hints")),
            return_reservation_id=body.get("return_reservation_id") in (True, "true", "True"),
            request=self.view.request,
        )

    def image(self, ref: str) -> Image:
        try:
            found = find_image(self.user, ref)
        except ImageNotActive:
            raise ValidationError({"imageRef": f"Image {ref} is not active."}) from None
        except ImageNotFound:
            raise ValidationError({"imageRef": f"Image {ref} could not be found."}) from None
        if found.kind != "disk":
            raise ValidationError({"imageRef": f"Image {ref} is not a disk image."})
        return found

    def key_name(self, value) -> str:
        if value in (None, ""):
            return ""
        if (
            not isinstance(value, str)
            or not SshKey.objects.filter(owner=self.user, name=value).exists()
        ):
            raise ValidationError({"key_name": "Invalid key_name provided."})
        return value

    def user_data(self, value) -> str:
        if value in (None, ""):
            return ""
        if not isinstance(value, str) or len(value) > MAX_USER_DATA:
            raise ValidationError(
                {"user_data": f"Base64 text of at most {MAX_USER_DATA} characters."}
            )
        try:
            text = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, ValueError):
            raise ValidationError(
                {"user_data": "User data needs to be valid base 64 (of UTF-8 text)."}
            ) from None
        return text

    def metadata(self, value) -> dict:
        return check_metadata(value)

    def count(self, body: dict, field: str, default: int) -> int:
        value = body.get(field, default)
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if number < 1 or number > 100:
            raise ValidationError({field: f"{value!r} is not a whole number from 1 to 100."})
        return number

    def zone(self, value) -> Cluster | None:
        if value in (None, ""):
            return None
        cluster = zones_of(self.user).filter(name=str(value).split(":", 1)[0]).first()
        if cluster is None:
            raise ValidationError(
                {"availability_zone": f"The requested availability zone is not available: {value}"}
            )
        return cluster

    def group(self, hints):
        if hints is None:
            return None
        if not isinstance(hints, dict):
            raise ValidationError({"os:scheduler_hints": "An object of scheduler hints."})
        ref = hints.get("group")
        if ref in (None, ""):
            return None
        found = find_group(self.user, str(ref))
        if found is None:
            raise ValidationError({"group": f"Instance group {ref} could not be found."})
        return found
