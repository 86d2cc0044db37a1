"""Portal pages for leases (included under /leases/ in the ``portal`` namespace)."""

from django.urls import path

from leases import views

urlpatterns = [
    path("", views.lease_list, name="leases"),
    path("<int:lease_id>/", views.lease_detail, name="lease"),
]
