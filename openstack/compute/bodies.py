"""Nova's request bodies for servers and server groups, read and checked as Nova checks them
(a 400 naming the field): a server's name and metadata, a server group's name and policy. A
``POST /servers`` body as a whole is read by launch.py's ``ServerRequest``."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError

from openstack.compute.base import NovaView

MAX_METADATA = 128


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
