"""Blazar's URLs under /reservation: no trailing slash (one is tolerated), no project id."""

from django.urls import re_path

from openstack.blazar import views
from openstack.blazar.base import not_found

ID = r"(?P<lease_id>[^/]+)"
HOST = r"(?P<host_id>[^/]+)"

urlpatterns = [
    re_path(r"^reservation/?$", views.VersionsView.as_view(), name="blazar-versions"),
    re_path(r"^reservation/v1/leases/?$", views.LeasesView.as_view(), name="blazar-leases"),
    re_path(rf"^reservation/v1/leases/{ID}/?$", views.LeaseView.as_view(), name="blazar-lease"),
    re_path(r"^reservation/v1/os-hosts/?$", views.HostsView.as_view(), name="blazar-hosts"),
    re_path(r"^reservation/v1/os-hosts/allocations/?$", views.AllocationsView.as_view()),
    re_path(r"^reservation/v1/os-hosts/properties/?$", views.PropertiesView.as_view()),
    re_path(
        r"^reservation/v1/os-hosts/properties/(?P<property_name>[^/]+)/?$",
        views.PropertyView.as_view(),
    ),
    re_path(rf"^reservation/v1/os-hosts/{HOST}/allocation/?$", views.HostAllocationView.as_view()),
    re_path(rf"^reservation/v1/os-hosts/{HOST}/?$", views.HostView.as_view(), name="blazar-host"),
    re_path(r"^reservation/.*$", not_found),
]
