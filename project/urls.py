"""Top-level URLs: the admin console, the API and its documentation, and the user portal."""

from django.contrib import admin
from django.urls import include, path

from project.metrics import metrics_view

handler400 = "project.api.errors.refused_request"
handler404 = "project.api.errors.not_found"

admin.site.site_header = "Corral administration"
admin.site.site_title = "Corral"
admin.site.index_title = "Clusters, hosts, VMs and access"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("project.api.urls")),
    path("metrics", metrics_view, name="metrics"),
    # OpenStack's APIs (the openstack app, the top layer: urls may name any app).
    path("", include("openstack.urls")),
    path("", include(("project.portal_urls", "portal"))),
]
