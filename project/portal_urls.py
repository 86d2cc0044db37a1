"""The user portal's pages (namespace ``portal``): logging in and out and the event stream here,
and every app's own pages (its ``urls.py``, named by ``portal_urls`` on its AppConfig)."""

from django.apps import apps
from django.contrib.auth import views as auth_views
from django.urls import include, path

from project import views
from project.access import token_pages
from project.lockout.forms import LoginForm
from project.lockout.views import answers_429_when_locked_out
from project.sshkeys import pages as sshkey_pages

urlpatterns = [
    path(
        "login/",
        answers_429_when_locked_out(
            auth_views.LoginView.as_view(
                redirect_authenticated_user=True, authentication_form=LoginForm
            )
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("events/stream/", views.event_stream, name="event-stream"),
    path("keys/", sshkey_pages.ssh_keys, name="ssh-keys"),
    path("keys/<int:key_id>/delete/", sshkey_pages.ssh_key_delete, name="ssh-key-delete"),
    path("tokens/", token_pages.api_tokens, name="api-tokens"),
    path("tokens/<int:token_id>/revoke/", token_pages.api_token_revoke, name="api-token-revoke"),
    *(
        path("", include(config.portal_urls))
        for config in apps.get_app_configs()
        if getattr(config, "portal_urls", None)
    ),
]
