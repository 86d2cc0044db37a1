"""Portal pages of the leases: My leases, a lease's page, and what may be done with it."""

from django.urls import path

from leases import views

urlpatterns = [
    path("leases/", views.lease_list, name="leases"),
    path("leases/list/", views.lease_list_fragment, name="lease-list"),
    path("leases/new/", views.lease_create, name="lease-new"),
    path("leases/check/", views.lease_check, name="lease-check"),
    path("leases/<int:lease_id>/", views.lease_detail, name="lease"),
    path("leases/<int:lease_id>/panel/", views.lease_panel, name="lease-panel"),
    path("leases/<int:lease_id>/end/", views.lease_end, name="lease-end"),
    path("leases/<int:lease_id>/launch/", views.lease_launch, name="lease-launch"),
    path(
        "leases/<int:lease_id>/launch/templates/",
        views.lease_launch_templates,
        name="lease-launch-templates",
    ),
    path("leases/<int:lease_id>/delete/", views.lease_delete, name="lease-delete"),
]
