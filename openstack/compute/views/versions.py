"""Nova's version documents: at the compute root the versions offered, at ``/v2.1`` the one
clients discover first, with its microversion range. Unauthenticated, as Nova's."""

from __future__ import annotations

from django.http import JsonResponse
from django.views import View

from openstack.compute.base import MAX_VERSION, MIN_VERSION, version_text
from openstack.identity.catalog import base_url

UPDATED = "2013-07-23T11:33:21Z"


def v21(request) -> dict:
    base = base_url(request)
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": version_text(MAX_VERSION),
        "min_version": version_text(MIN_VERSION),
        "updated": UPDATED,
        "links": [
            {"rel": "self", "href": f"{base}/compute/v2.1/"},
            {"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"},
        ],
        "media-types": [
            {
                "base": "application/json",
                "type": "application/vnd.openstack.compute+json;version=2.1",
            }
        ],
    }


class VersionsView(View):
    """``GET /compute``: the versions offered (only v2.1)."""

    def get(self, request):
        version = {key: value for key, value in v21(request).items() if key != "media-types"}
        return JsonResponse({"versions": [version]})


class VersionView(View):
    """``GET /compute/v2.1``."""

    def get(self, request):
        return JsonResponse({"version": v21(request)})
