"""OpenStack's APIs, each with or without a trailing slash (clients lose POST bodies on
redirects): Keystone (log-in), Blazar (leases), Nova (servers), Glance (images)."""

from django.urls import include, path

urlpatterns = [
    path("", include("openstack.identity.urls")),
    path("", include("openstack.blazar.urls")),
    path("", include("openstack.compute.urls")),
    path("", include("openstack.image.urls")),
]
