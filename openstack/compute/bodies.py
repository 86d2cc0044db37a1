"""Nova's request bodies, read and checked as Nova checks them (a 400 naming the field): a
server's name and metadata, a server group's name and policy, a key pair's name. A
``POST /servers`` body as a whole is read by launch.py's ``ServerRequest``."""

from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError

from openstack.compute.base import NovaView
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
