"""Blazar's URLs under /reservation: no trailing slash (one is tolerated), no project id."""

from django.urls import re_path

from openstack.blazar import host_views, views
from openstack.blazar.errors import not_found

ID = r"(?P<lease_id>[^/]+)"
HOST = r"(?P<host_id>[^/]+)"

urlpatterns = [
    re_path(r"^reservation/?$", views.VersionsView.as_view(), name="blazar-versions"),
    re_path(r"^reservation/v1/leases/?$", views.LeasesView.as_view(), name="blazar-leases"),
    re_path(rf"^reservation/v1/leases/{ID}/?$", views.LeaseView.as_view(), name="blazar-lease"),
    re_path(r"^reservation/v1/os-hosts/?$", host_views.HostsView.as_view(), name="blazar-hosts"),
    re_path(r"^reservation/v1/os-hosts/allocations/?$", host_views.AllocationsView.as_view()),
    re_path(r"^reservation/v1/os-hosts/properties/?$", host_views.PropertiesView.as_view()),
    re_path(
        r"^reservation/v1/os-hosts/properties/(?P<property_name>[^/]+)/?$",
        host_views.PropertyView.as_view(),
    ),
    re_path(
        rf"^reservation/v1/os-hosts/{HOST}/allocation/?$", host_views.HostAllocationView.as_view()
    ),
    re_path(
        rf"^reservation/v1/os-hosts/{HOST}/?$", host_views.HostView.as_view(), name="blazar-host"
    ),
    re_path(r"^reservation/.*$", not_found),
]
