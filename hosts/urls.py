"""Portal pages of the inventory: My VMs, a VM's page, its operations and images, a job's
progress, My images."""

from django.urls import path, re_path

from hosts import image_pages, views
from hosts.guests import console_pages

urlpatterns = [
    path("vms/", views.vm_list, name="vms"),
    path("vms/rows/", views.vm_rows, name="vm-rows"),
    path("vms/<int:vm_id>/", views.vm_detail, name="vm"),
    path("vms/<int:vm_id>/panel/", views.vm_panel, name="vm-panel"),
    path("vms/<int:vm_id>/hold/", views.vm_hold, name="vm-hold"),
    path("vms/<int:vm_id>/settings/", views.vm_settings, name="vm-settings"),
    path("vms/<int:vm_id>/image/", views.vm_image, name="vm-image"),
    path("vms/<int:vm_id>/console/", console_pages.vm_console, name="vm-console"),
    path("vms/<int:vm_id>/terminal/", console_pages.vm_terminal, name="vm-terminal"),
    path("vms/<int:vm_id>/console-log/", console_pages.vm_console_log, name="vm-console-log"),
    re_path(
        rf"^vms/(?P<vm_id>[0-9]+)/(?P<operation>{'|'.join(sorted(views.OPERATION_KINDS))})/$",
        views.vm_operation,
        name="vm-operation",
    ),
    path("jobs/<int:job_id>/", views.job_progress, name="job"),
    path("images/", image_pages.my_images, name="images"),
    path("console/", console_pages.console_by_ticket, name="console-by-ticket"),
]
