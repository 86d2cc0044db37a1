"""Glance's URLs under /image (each with or without a trailing slash); anything else under it
is Glance's 404 in JSON."""

from django.urls import re_path

from openstack.image import discovery, members, views
from openstack.image.base import not_found

ID = r"(?P<image_id>[^/]+)"

urlpatterns = [
    re_path(r"^image(?:/versions|/v2)?/?$", views.VersionsView.as_view(), name="glance-versions"),
    re_path(r"^image/v2/images/?$", views.ImagesView.as_view(), name="glance-images"),
    re_path(rf"^image/v2/images/{ID}/?$", views.ImageView.as_view(), name="glance-image"),
    re_path(rf"^image/v2/images/{ID}/file/?$", views.ImageFileView.as_view(), name="glance-file"),
    re_path(
        rf"^image/v2/images/{ID}/members/?$", members.MembersView.as_view(), name="glance-members"
    ),
    re_path(
        rf"^image/v2/images/{ID}/members/(?P<member_id>[^/]+)/?$",
        members.MemberView.as_view(),
        name="glance-member",
    ),
    re_path(r"^image/v2/info/usage/?$", discovery.UsageView.as_view(), name="glance-usage"),
    re_path(r"^image/v2/schemas/member/?$", members.MemberSchemaView.as_view()),
    re_path(r"^image/v2/schemas/members/?$", members.MembersSchemaView.as_view()),
    re_path(r"^image/v2/schemas/image/?$", views.ImageSchemaView.as_view()),
    re_path(r"^image/v2/schemas/images/?$", views.ImagesSchemaView.as_view()),
    re_path(r"^image(?:/.*)?$", not_found),
]
