"""Glance's image list: its filters (``name``, ``id``, ``status``, ``visibility``, ``owner``,
``tag``; ``in:a,b`` for several), its order (``sort_key``, ``sort_dir``: newest first by
default) and its pages (``limit``, ``marker``, and a ``next`` link while more follow).
Other parameters Glance knows (``member_status``, ``os_hidden``, …) are tolerated."""

from __future__ import annotations

from urllib.parse import urlencode

from openstack.image.base import GlanceRefusal
from openstack.image.bodies import VISIBILITIES
from openstack.image.presenters import image_view
from openstack.image.queries import Entry, visible_entries

DEFAULT_LIMIT = 25
MAX_LIMIT = 1000
SORT_KEYS = {
    "created_at": lambda entry: entry.created_at,
    "updated_at": lambda entry: entry.updated_at,
    "name": lambda entry: entry.name,
    "id": lambda entry: entry.id,
    "status": lambda entry: entry.status,
    "size": lambda entry: entry.size,
}


def _choices(value: str) -> set[str]:
    if value.startswith("in:"):
        return {part.strip().strip('"') for part in value[3:].split(",")}
    return {value}


def _matches(entry: Entry, params) -> bool:
    tests = {
        "name": lambda: entry.name,
        "id": lambda: entry.id,
        "status": lambda: entry.status,
        "owner": lambda: entry.owner,
    }
    for key, value_of in tests.items():
        if key in params and value_of() not in _choices(params[key]):
            return False
    visibility = params.get("visibility", "all")
    if visibility != "all" and entry.visibility != visibility:
        return False
    return all(tag in entry.tags for tag in params.getlist("tag"))


def _visibility(params) -> str | None:
    """The one visibility asked for, or ``all`` (every image the caller may see); none: what
    Glance lists by default."""
    visibility = params.get("visibility")
    if visibility is None or visibility == "all":
        return visibility
    if visibility not in VISIBILITIES:
        raise GlanceRefusal(400, f"Invalid visibility value: {visibility}")
    return visibility


def _limit(params) -> int:
    raw = params.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        raise GlanceRefusal(400, "limit param must be an integer") from None
    if limit < 0:
        raise GlanceRefusal(400, "limit param must be positive")
    return min(limit, MAX_LIMIT)


def _order(params) -> tuple[str, bool]:
    key, direction = params.get("sort_key", "created_at"), params.get("sort_dir", "desc")
    if "sort" in params:  # the newer form: sort=name:asc,created_at (its first key rules)
        key, _, direction = params["sort"].split(",")[0].partition(":")
        direction = direction or "desc"
    if key not in SORT_KEYS:
        raise GlanceRefusal(400, f"Unsupported sort_key {key!r}: one of {', '.join(SORT_KEYS)}.")
    if direction not in ("asc", "desc"):
        raise GlanceRefusal(400, f"Unsupported sort_dir {direction!r}: asc or desc.")
    return key, direction == "desc"


def list_images(user, params) -> dict:
    """One page of the images ``user`` may see, as Glance answers ``GET /v2/images``."""
    limit = _limit(params)
    key, descending = _order(params)
    value_of = SORT_KEYS[key]
    entries = sorted(
        (
            entry
            for entry in visible_entries(user, visibility=_visibility(params))
            if _matches(entry, params)
        ),
        key=lambda entry: (
            (value_of(entry) is not None, value_of(entry) or "", entry.id)
            if key in ("name", "size")
            else (value_of(entry), entry.id)
        ),
        reverse=descending,
    )
    start = 0
    if "marker" in params:
        ids = [entry.id for entry in entries]
        if params["marker"] not in ids:
            raise GlanceRefusal(400, f"marker {params['marker']} could not be found.")
        start = ids.index(params["marker"]) + 1
    page = entries[start : start + limit]
    answer = {
        "images": [image_view(entry) for entry in page],
        "first": "/v2/images",
        "schema": "/v2/schemas/images",
    }
    if page and start + limit < len(entries):
        query = {k: v for k, v in params.items() if k not in ("marker", "limit")}
        query.update(marker=page[-1].id, limit=limit)
        answer["next"] = f"/v2/images?{urlencode(query)}"
    return answer
