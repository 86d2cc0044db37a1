"""Portal pages for leases (included under /leases/ in the ``portal`` namespace)."""

from django.urls import path

from leases import views

urlpatterns = [
    path("", views.lease_list, name="leases"),
    path("list/", views.lease_list_fragment, name="lease-list"),
    path("new/", views.lease_create, name="lease-new"),
    path("check/", views.lease_check, name="lease-check"),
    path("<int:lease_id>/", views.lease_detail, name="lease"),
    path("<int:lease_id>/panel/", views.lease_panel, name="lease-panel"),
    path("<int:lease_id>/end/", views.lease_end, name="lease-end"),
    path("<int:lease_id>/launch/", views.lease_launch, name="lease-launch"),
    path("<int:lease_id>/delete/", views.lease_delete, name="lease-delete"),
]
