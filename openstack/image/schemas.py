"""Glance's JSON schemas of an image and of the image list (``/v2/schemas/image[s]``), for the
fields Corral's images have; extra properties are strings."""

from __future__ import annotations

from openstack.image.bodies import CONTAINER_FORMATS, DISK_FORMATS, VISIBILITIES


def _nullable(kind: str, **more) -> dict:
    return {"type": [kind, "null"], **more}


def image_schema() -> dict:
    read_only = {"readOnly": True}
    return {
        "name": "image",
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9a-f-]{36}$"},
            "name": _nullable("string", maxLength=255),
            "status": {"type": "string", "enum": ["queued", "saving", "active"], **read_only},
            "visibility": {"type": "string", "enum": list(VISIBILITIES)},
            "protected": {"type": "boolean"},
            "os_hidden": {"type": "boolean"},
            "checksum": _nullable("string", maxLength=32, **read_only),
            "os_hash_algo": _nullable("string", maxLength=64, **read_only),
            "os_hash_value": _nullable("string", maxLength=128, **read_only),
            "owner": _nullable("string", maxLength=255),
            "size": _nullable("integer", **read_only),
            "virtual_size": _nullable("integer", **read_only),
            "container_format": {"type": ["null", "string"], "enum": [None, *CONTAINER_FORMATS]},
            "disk_format": {"type": ["null", "string"], "enum": [None, *DISK_FORMATS]},
            "created_at": {"type": "string", **read_only},
            "updated_at": {"type": "string", **read_only},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 255}},
            "min_ram": {"type": "integer"},
            "min_disk": {"type": "integer"},
            "self": {"type": "string", **read_only},
            "file": {"type": "string", **read_only},
            "schema": {"type": "string", **read_only},
        },
        "additionalProperties": {"type": "string"},
        "links": [
            {"rel": "self", "href": "{self}"},
            {"rel": "enclosure", "href": "{file}"},
            {"rel": "describedby", "href": "{schema}"},
        ],
    }


def images_schema() -> dict:
    return {
        "name": "images",
        "properties": {
            "images": {"type": "array", "items": image_schema()},
            "schema": {"type": "string"},
            "first": {"type": "string"},
            "next": {"type": "string"},
        },
        "links": [
            {"rel": "first", "href": "{first}"},
            {"rel": "next", "href": "{next}"},
            {"rel": "describedby", "href": "{schema}"},
        ],
    }
