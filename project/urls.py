"""Top-level URLs: the admin console, the API and its documentation, and the user portal."""

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_safe

from project.metrics import metrics_view

handler400 = "project.api.errors.refused_request"
handler404 = "project.api.errors.not_found"

admin.site.site_header = "Corral administration"
admin.site.site_title = "Corral"
admin.site.index_title = "Clusters, hosts, VMs and access"


@require_safe
def favicon(request):
    """Browsers ask for /favicon.ico whatever a page links to (a JSON answer, a download): the
    site's icon, where the static files are (WhiteNoise serves them under `make serve`)."""
    response = HttpResponseRedirect(static("corral/favicon.svg"))
    patch_cache_control(response, public=True, max_age=86400)
    return response


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("api/", include("project.api.urls")),
    path("metrics", metrics_view, name="metrics"),
    # OpenStack's APIs (the openstack app, the top layer: urls may name any app).
    path("", include("openstack.urls")),
    path("", include(("project.portal_urls", "portal"))),
]
