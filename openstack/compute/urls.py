"""Nova's URLs under /compute/v2.1 (each with or without a trailing slash, and without the
project id older clients put after the version: Corral's catalog names none)."""

from django.urls import re_path

from openstack.compute import flavors, servers, versions
from openstack.compute.base import not_found

V = r"^compute/v2\.1"
FLAVOR = r"(?P<flavor_id>[^/]+)"
SERVER = r"(?P<server_id>[^/]+)"

urlpatterns = [
    re_path(r"^compute/?$", versions.VersionsView.as_view(), name="nova-versions"),
    re_path(rf"{V}/?$", versions.VersionView.as_view(), name="nova-version"),
    re_path(rf"{V}/flavors/?$", flavors.FlavorsView.as_view(), name="nova-flavors"),
    re_path(rf"{V}/flavors/detail/?$", flavors.FlavorsDetailView.as_view()),
    re_path(rf"{V}/flavors/{FLAVOR}/?$", flavors.FlavorView.as_view(), name="nova-flavor"),
    re_path(rf"{V}/servers/?$", servers.ServersView.as_view(), name="nova-servers"),
    re_path(rf"{V}/servers/detail/?$", servers.ServersDetailView.as_view()),
    re_path(rf"{V}/servers/{SERVER}/?$", servers.ServerView.as_view(), name="nova-server"),
    re_path(rf"{V}/servers/{SERVER}/action/?$", servers.ServerActionView.as_view()),
    re_path(rf"{V}/servers/{SERVER}/remote-consoles/?$", servers.RemoteConsolesView.as_view()),
    re_path(r"^compute/.*$", not_found),
]
