"""The user portal's pages (namespace ``portal``); each app keeps its views in views.py."""

from django.contrib.auth import views as auth_views
from django.urls import include, path

from hosts import views as vm_views
from pools import views as pool_views
from project import lockout, views

urlpatterns = [
    path(
        "login/",
        lockout.answers_429_when_locked_out(
            auth_views.LoginView.as_view(
                redirect_authenticated_user=True, authentication_form=lockout.LoginForm
            )
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("events/stream/", views.event_stream, name="event-stream"),
    path("", pool_views.take_page, name="home"),
    path("pools/cards/", pool_views.pool_cards, name="pool-cards"),
    path("pools/<int:pool_id>/take/", pool_views.take_vm, name="take"),
    path("vms/", vm_views.vm_list, name="vms"),
    path("vms/rows/", vm_views.vm_rows, name="vm-rows"),
    path("vms/<int:vm_id>/", vm_views.vm_detail, name="vm"),
    path("vms/<int:vm_id>/panel/", vm_views.vm_panel, name="vm-panel"),
    path("vms/<int:vm_id>/return/", vm_views.vm_return, name="vm-return"),
    path("vms/<int:vm_id>/<str:operation>/", vm_views.vm_operation, name="vm-operation"),
    path("jobs/<int:job_id>/", vm_views.job_progress, name="job"),
    path("leases/", include("leases.urls")),
]
