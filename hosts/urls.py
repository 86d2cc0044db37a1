"""Portal pages of the inventory: My VMs, a VM's page, its operations, snapshots and images,
a job's progress, My images and the user's own templates."""

from django.urls import path, re_path

from hosts import chart_pages, image_pages, snapshot_pages, template_pages, views
from hosts.guests import console_pages

urlpatterns = [
    path("vms/", views.vm_list, name="vms"),
    path("vms/rows/", views.vm_rows, name="vm-rows"),
    path("vms/<int:vm_id>/", views.vm_detail, name="vm"),
    path("vms/<int:vm_id>/panel/", views.vm_panel, name="vm-panel"),
    path("vms/<int:vm_id>/day-charts/", chart_pages.vm_day_charts, name="vm-day-charts"),
    path("vms/<int:vm_id>/hold/", views.vm_hold, name="vm-hold"),
    path("vms/<int:vm_id>/settings/", views.vm_settings, name="vm-settings"),
    path("vms/<int:vm_id>/image/", views.vm_image, name="vm-image"),
    path("vms/<int:vm_id>/snapshots/", snapshot_pages.vm_snapshot_list, name="vm-snapshots"),
    path(
        "vms/<int:vm_id>/snapshots/take/",
        snapshot_pages.vm_snapshot_take,
        name="vm-snapshot-take",
    ),
    path(
        "vms/<int:vm_id>/snapshots/<int:snapshot_id>/revert/",
        snapshot_pages.vm_snapshot_revert,
        name="vm-snapshot-revert",
    ),
    path(
        "vms/<int:vm_id>/snapshots/<int:snapshot_id>/delete/",
        snapshot_pages.vm_snapshot_delete,
        name="vm-snapshot-delete",
    ),
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
    path("images/<int:image_id>/template/", template_pages.template_new, name="template-new"),
    path(
        "templates/<int:template_id>/delete/",
        template_pages.template_delete,
        name="template-delete",
    ),
    path("console/", console_pages.console_by_ticket, name="console-by-ticket"),
]
