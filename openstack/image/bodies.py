"""Glance's request bodies, read and checked: an image's fields on create, and the JSON-patch
operations that change them (``application/openstack-images-v2.1-json-patch``).

Both end in the same check of the fields a user may set, so a patch can set nothing a create
could not. Anything else is refused as Glance does: a read-only attribute is a 403, a bad
value a 400 naming its field.
"""

from __future__ import annotations

import uuid

from openstack.image.base import GlanceRefusal

# Formats Corral keeps: disks qcow2 or raw (read from their content), kernels and initrds.
DISK_FORMATS = ("qcow2", "raw", "aki", "ari")
CONTAINER_FORMATS = ("bare", "aki", "ari")
# Set by Glance itself, never by a request.
READ_ONLY = {
    "status",
    "size",
    "virtual_size",
    "checksum",
    "os_hash_algo",
    "os_hash_value",
    "created_at",
    "updated_at",
    "self",
    "file",
    "schema",
    "direct_url",
    "locations",
    "stores",
}
CORE = {"name", "disk_format", "container_format", "min_disk", "min_ram", "tags", "visibility"}
VISIBILITIES = ("private", "shared", "public", "community")
# Accepted with the only value Corral's images have.
FIXED = {"protected": False, "os_hidden": False}
MAX_NAME = 255
MAX_PROPERTIES = 128
MAX_PROPERTY_VALUE = 65535


def bad(message: str) -> GlanceRefusal:
    return GlanceRefusal(400, message)


def image_fields(document, *, owner_id: str) -> dict:
    """The fields of ``document`` (a create body, or an image's fields after a patch) as
    ``GlanceImage`` keeps them: ``properties`` holds every other key."""
    if not isinstance(document, dict):
        raise bad("The body must be a JSON object of the image's fields.")
    fields: dict = {"properties": {}}
    for key, value in document.items():
        if key in READ_ONLY:
            raise GlanceRefusal(403, f"Attribute '{key}' is read-only.")
        if key == "owner":
            if value is not None and str(value) != owner_id:
                raise GlanceRefusal(403, "You may not give an image to another project.")
        elif key == "id":
            fields["id"] = _image_id(value)
        elif key in FIXED:
            if value != FIXED[key]:
                raise bad(_fixed_message(key, value))
        elif key in CORE:
            fields[key] = CHECKS[key](value)
        else:
            fields["properties"][key] = _property(key, value)
    if len(fields["properties"]) > MAX_PROPERTIES:
        raise GlanceRefusal(413, f"An image has at most {MAX_PROPERTIES} extra properties.")
    fields["properties"] = {k: v for k, v in fields["properties"].items() if v is not None}
    return fields


def _fixed_message(key: str, value) -> str:
    return f"{key}: Corral's images are never {key} (only {FIXED[key]!r})."


def _image_id(value) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise bad(f"id: {value!r} is not a UUID.") from None


def _name(value):
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME:
        raise bad(f"name: a string of at most {MAX_NAME} characters (or null).")
    return value


def _disk_format(value):
    if value is None:
        return None
    if value not in DISK_FORMATS:
        raise bad(
            f"disk_format: Corral keeps qcow2 and raw disks, aki kernels and ari initrds, "
            f"not {value!r} (qemu-img convert -O qcow2 …)."
        )
    return value


def _container_format(value):
    if value is None:
        return None
    if value not in CONTAINER_FORMATS:
        raise bad(f"container_format: one of {', '.join(CONTAINER_FORMATS)}, not {value!r}.")
    return value


def _size(name: str):
    def check(value) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
            raise bad(f"{name}: a whole number, 0 or more.")
        return value

    return check


def _tags(value) -> list[str]:
    if not isinstance(value, list) or not all(
        isinstance(tag, str) and 0 < len(tag) <= MAX_NAME for tag in value
    ):
        raise bad(f"tags: a list of strings of 1 to {MAX_NAME} characters.")
    return list(dict.fromkeys(value))


def _visibility(value) -> str:
    if value not in VISIBILITIES:
        raise bad(f"visibility: one of {', '.join(VISIBILITIES)}, not {value!r}.")
    return value


CHECKS = {
    "visibility": _visibility,
    "name": _name,
    "disk_format": _disk_format,
    "container_format": _container_format,
    "min_disk": _size("min_disk"),
    "min_ram": _size("min_ram"),
    "tags": _tags,
}


def _property(key: str, value):
    if not 0 < len(key) <= MAX_NAME:
        raise bad(f"A property's name has 1 to {MAX_NAME} characters: {key[:40]!r}….")
    if value is not None and (not isinstance(value, str) or len(value) > MAX_PROPERTY_VALUE):
        raise bad(f"{key}: a property's value is a string (at most {MAX_PROPERTY_VALUE}).")
    return value


def apply_patch(fields: dict, operations, *, queued: bool) -> dict:
    """``fields`` (an image's settable fields, extra properties at the top level) with the
    JSON-patch ``operations`` applied."""
    if not isinstance(operations, list):
        raise bad("The body must be a list of JSON-patch operations.")
    document = dict(fields)
    for operation in operations:
        if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
            raise bad('Each operation is an object with "op" and "path".')
        op, key = operation.get("op"), _pointer(operation["path"])
        if key in READ_ONLY or key in ("id", "owner"):
            raise GlanceRefusal(403, f"Attribute '{key}' is read-only.")
        if key in ("disk_format", "container_format") and not queued:
            raise GlanceRefusal(403, f"Attribute '{key}' can be only replaced for a queued image.")
        if op in ("add", "replace"):
            if "value" not in operation:
                raise bad(f'"{op}" of {key} needs a "value".')
            if op == "replace" and key not in document and key not in CORE | FIXED.keys():
                raise GlanceRefusal(409, f"Property {key} does not exist.")
            document[key] = operation["value"]
        elif op == "remove":
            if key in CORE or key in FIXED:
                raise GlanceRefusal(403, f"Attribute '{key}' cannot be removed.")
            if key not in document:
                raise GlanceRefusal(409, f"Property {key} does not exist.")
            del document[key]
        else:
            raise bad(f"op: one of add, replace, remove, not {op!r}.")
    return document


def _pointer(path: str) -> str:
    parts = path.split("/")
    if len(parts) != 2 or parts[0] != "" or not parts[1]:
        raise bad(f"path: one attribute, as /name, not {path!r}.")
    return parts[1].replace("~1", "/").replace("~0", "~")
