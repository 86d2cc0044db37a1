"""URLs of the minimal Keystone under /identity (each with or without a trailing slash)."""

from django.urls import re_path

from openstack.identity import views

urlpatterns = [
    re_path(r"^identity/?$", views.VersionsView.as_view(), name="identity-versions"),
    re_path(r"^identity/v3/?$", views.VersionView.as_view(), name="identity-v3"),
    re_path(r"^identity/v3/auth/tokens/?$", views.TokensView.as_view(), name="identity-tokens"),
    re_path(r"^identity/v3/auth/catalog/?$", views.CatalogView.as_view()),
    re_path(r"^identity/v3/auth/projects/?$", views.ProjectsView.as_view()),
    re_path(r"^identity/v3/projects/?$", views.EveryProjectView.as_view()),
    re_path(r"^identity/v3/projects/(?P<project_id>[^/]+)/?$", views.ProjectView.as_view()),
    re_path(r"^identity/v3/users/?$", views.UsersView.as_view()),
    re_path(r"^identity/v3/users/(?P<user_id>[^/]+)/projects/?$", views.ProjectsView.as_view()),
    re_path(
        r"^identity/v3/users/(?P<user_id>[^/]+)/application_credentials/?$",
        views.CredentialsView.as_view(),
    ),
    re_path(
        r"^identity/v3/users/(?P<user_id>[^/]+)/application_credentials/(?P<credential_id>[^/]+)/?$",
        views.CredentialView.as_view(),
    ),
    re_path(r"^identity/v3/users/(?P<user_id>[^/]+)/?$", views.UserView.as_view()),
    re_path(r"^identity/.*$", views.NotFoundView.as_view()),
]
