"""Glance's quota usage (``GET /v2/info/usage``): the caller's image quota and what they use of
it, Corral's quota (``hosts.quotas``) in the words of Glance's unified limits.

Glance answers four limits. ``image_count_total`` is Corral's limit on images (a queued image,
its data still to come, counts as Glance counts it),
``image_size_total`` its limit on image storage, in MiB as Glance counts it (Corral's GiB
times 1024; the use rounded down to whole MiB, as Glance's). Corral has no staging area
(there is no import) and keeps no upload in progress: ``image_stage_total`` and
``image_count_uploading`` are always 0 used of no limit. No limit is -1.
"""

from __future__ import annotations

import math

from rest_framework.response import Response

from hosts import quotas
from openstack.image import services
from openstack.image.base import GlanceView

MIB_PER_GIB = 1024
NO_LIMIT = -1


def _limit(value: int | None, scale: int = 1) -> int:
    return NO_LIMIT if value is None else value * scale


def usage_of(user) -> dict:
    """Glance's ``usage`` document for ``user``: each limit and its use, their queued images
    counted with their images as Glance counts them (five statements)."""
    limits, used = quotas.effective_limits(user), quotas.usage(user)
    images = used.images + services.queued_of(user)
    return {
        "image_size_total": {
            "limit": _limit(limits["image_gb"], MIB_PER_GIB),
            "usage": math.floor(used.image_gb * MIB_PER_GIB),
        },
        "image_count_total": {"limit": _limit(limits["images"]), "usage": images},
        "image_stage_total": {"limit": NO_LIMIT, "usage": 0},
        "image_count_uploading": {"limit": NO_LIMIT, "usage": 0},
    }


class UsageView(GlanceView):
    """``GET /v2/info/usage``: the caller's own limits and use (each user is their project)."""

    def get(self, request):
        return Response({"usage": usage_of(request.user)})
