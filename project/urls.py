"""Top-level URLs: the admin console, the API and its documentation."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

handler404 = "project.api.errors.not_found"

admin.site.site_header = "Corral administration"
admin.site.site_title = "Corral"
admin.site.index_title = "Clusters, hosts, VMs and access"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("project.api.urls")),
    path("", RedirectView.as_view(url="/api/docs/", permanent=False)),
]
