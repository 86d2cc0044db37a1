"""Everything under /api/: each app's routes (its ``api/urls.py``, named by ``api_urls`` on its
AppConfig), access control, token login and the schema."""

from django.apps import apps
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from project.api import access_views, errors, event_feed, token_views
from project.api.root import ApiRootView
from project.sshkeys import api as sshkey_api
from project.web.csp import api_docs_policy

router = SimpleRouter()
router.register("roles", access_views.RoleViewSet)
router.register("permissions", access_views.GrantViewSet, basename="grant")
router.register("users", access_views.UserViewSet)
router.register("groups", access_views.GroupViewSet)
router.register("me/sshkeys", sshkey_api.SshKeyViewSet, basename="sshkey")
router.register("me/tokens", token_views.TokenViewSet, basename="token")

urlpatterns = [
    path("", ApiRootView.as_view(), name="api-root"),
    *(
        path("", include(config.api_urls))
        for config in apps.get_app_configs()
        if getattr(config, "api_urls", None)
    ),
    path("", include(router.urls)),
    path("me/", access_views.MeView.as_view(), name="me"),
    path("events/", event_feed.event_feed, name="events"),
    path("auth/token/", token_views.ObtainTokenView.as_view(), name="auth-token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI with its start-up script served apart (?script), not inline (project/web/csp.py).
    path(
        "docs/",
        api_docs_policy(
            SpectacularSwaggerSplitView.as_view(
                url_name="schema", template_name="api/swagger_ui.html"
            )
        ),
        name="api-docs",
    ),
    # Last: any other path under /api/ is a JSON 404, for every method.
    re_path(r"^", errors.unknown_path, name="api-unknown"),
]
