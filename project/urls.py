"""Top-level URLs: the admin console, the API and its documentation, and the user portal."""

from django.contrib import admin
from django.urls import include, path

handler404 = "project.api.errors.not_found"

admin.site.site_header = "Corral administration"
admin.site.site_title = "Corral"
admin.site.index_title = "Clusters, hosts, VMs and access"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("project.api.urls")),
    path("", include(("project.portal_urls", "portal"))),
]
