"""Admin console screens for VM pools."""

from django.contrib import admin, messages

from pools import services
from pools.models import VmPool
from project.admin_base import ScopedAdmin
from project.api.errors import Conflict


@admin.register(VmPool)
class VmPoolAdmin(ScopedAdmin):
    list_display = [
        "name",
        "cluster",
        "template",
        "type",
        "size",
        "prestarted_vms",
        "prestarted_now",
        "max_user_vms",
        "stateless",
    ]
    list_filter = ["cluster", "type", "stateless"]
    search_fields = ["name", "description"]
    list_select_related = ["cluster", "template"]
    actions = ["prestart_now"]

    def get_queryset(self, request):
        return super().get_queryset(request).with_counts()

    def get_readonly_fields(self, request, obj=None):
        return ["cluster", "template"] if obj is not None else []

    @admin.display(description="running, unassigned")
    def prestarted_now(self, obj):
        return obj.running_unassigned

    def save_model(self, request, obj, form, change):
        try:
            if not change:
                services.create_pool(obj)
                return
            changes = {name: getattr(obj, name) for name in form.changed_data}
            original = VmPool.objects.get(pk=obj.pk)
            for name in changes:
                setattr(obj, name, getattr(original, name))
            for warning in services.update_pool(obj, changes):
                self.message_user(request, warning.capitalize() + ".", messages.WARNING)
        except Conflict as exc:
            self.message_user(request, f"Nothing changed: {exc.detail}", messages.ERROR)

    def delete_model(self, request, obj):
        try:
            services.delete_pool(obj)
        except Conflict as exc:
            self.message_user(request, f"Not deleted: {exc.detail}", messages.ERROR)

    @admin.action(description="Prestart now (run the monitor for the selected pools)")
    def prestart_now(self, request, queryset):
        started = sum(services.monitor_pool(pool.pk) for pool in queryset)
        self.message_user(request, f"Queued {started} start job(s).")
