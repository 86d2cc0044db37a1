"""Admin console screens for VM pools."""

from django.contrib import admin, messages
from django.db.models import F

from hosts.models import VirtualMachine
from pools import monitor, services, tasks
from pools.models import VmPool
from project.access.permissions import holds
from project.admin.base import ScopedAdmin, extend_admin
from project.errors import Refused


def below_prestarted(pools):
    """Pools whose prestarted VMs (as the monitor counts them) fall short of
    ``prestarted_vms`` (``pools`` annotated by ``with_counts()``)."""
    return pools.filter(prestarted_vms__gt=0).filter(prestarted_vms__gt=F("prestarted_now"))


class PrestartedFilter(admin.SimpleListFilter):
    title = "prestarted VMs"
    parameter_name = "prestarted"

    def lookups(self, request, model_admin):
        return [("short", "Below the prestarted level")]

    def queryset(self, request, queryset):
        if self.value() == "short":
            return below_prestarted(queryset)
        return queryset


@admin.register(VmPool)
class VmPoolAdmin(ScopedAdmin):
    # Short headings and a short type: the list fits a 1366 px screen (admin.css).
    list_display = [
        "name",
        "cluster",
        "type_label",
        "total",
        "prestarted",
        "running_now",
        "starting",
        "assigned",
        "held",
        "per_user",
        "stateless",
    ]
    list_filter = [
        ("cluster", admin.RelatedOnlyFieldListFilter),
        PrestartedFilter,
        "type",
        "stateless",
    ]
    search_fields = ["name", "description"]
    list_select_related = ["cluster", "template"]
    actions = ["prestart_now"]

    def get_queryset(self, request):
        return super().get_queryset(request).with_counts().with_takeable()

    def get_readonly_fields(self, request, obj=None):
        return ["cluster", "template"] if obj is not None else []

    @admin.display(ordering="type", description="type")
    def type_label(self, obj):
        """The type without its explanation: "Automatic" or "Manual"."""
        return obj.get_type_display().partition(" (")[0]

    @admin.display(ordering="total_vms", description="VMs (now / size)")
    def total(self, obj):
        return f"{obj.total_vms} / {obj.size}"

    @admin.display(ordering="prestarted_now", description="prestarted (now / wanted)")
    def prestarted(self, obj):
        return f"{obj.prestarted_now} / {obj.prestarted_vms}"

    @admin.display(ordering="ready_vms", description="ready")
    def running_now(self, obj):
        """What taking a VM hands out running, at once (the pick's own rule)."""
        return obj.ready_vms

    @admin.display(ordering="starting_vms", description="starting")
    def starting(self, obj):
        return obj.starting_vms

    @admin.display(ordering="assigned_vms", description="assigned")
    def assigned(self, obj):
        return obj.assigned_vms

    @admin.display(ordering="held_vms", description="held for admins")
    def held(self, obj):
        return obj.held_vms

    @admin.display(ordering="max_user_vms", description="per user")
    def per_user(self, obj):
        return obj.max_user_vms

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
        except Refused as exc:
            self.message_user(request, f"Nothing changed: {exc.message}", messages.ERROR)

    def delete_model(self, request, obj):
        try:
            services.delete_pool(obj)
        except Refused as exc:
            self.message_user(request, f"Not deleted: {exc.message}", messages.ERROR)

    @admin.action(
        description="Prestart now (run the monitor for the selected pools)",
        permissions=["change"],
    )
    def prestart_now(self, request, queryset):
        started = 0
        for pool in queryset:
            if not holds(request.user, "pools.change_vmpool", pool):
                self.message_user(
                    request, f"You may not prestart VMs of pool {pool.name}.", messages.ERROR
                )
                continue
            started += monitor.run_for_pool(pool.pk)
        self.message_user(request, f"Queued {started} start job(s).")


class PoolVmActions:
    """What the VMs' admin screen offers for pools: give a VM back, let the prestart monitor
    try again the VMs it gave up on."""

    def has_return_permission(self, request):
        return holds(request.user, "pools.return_vmpool")

    @admin.action(description="Clear prestart failures", permissions=["change"])
    def clear_prestart_failures(self, request, queryset):
        """Let the prestart monitor try again the VMs it gave up on."""
        cleared, refused = [], []
        for vm in queryset.filter(prestart_failures__gt=0):
            if holds(request.user, "hosts.change_virtualmachine", vm):
                cleared.append(vm)
            else:
                refused.append(vm.name)
        for name in refused:
            self.message_user(
                request, f"You may not clear prestart failures of VM {name}.", messages.ERROR
            )
        VirtualMachine.objects.filter(pk__in=[vm.pk for vm in cleared]).update(
            prestart_failures=0, prestart_retry_at=None
        )
        for pool_id in {vm.pool_id for vm in cleared if vm.pool_id}:
            tasks.nudge_monitor(pool_id)
        if cleared:
            self.message_user(
                request,
                f"Cleared prestart failures of {len(cleared)} VM(s): "
                f"{', '.join(vm.name for vm in cleared)}; their pools may prestart them again.",
                messages.SUCCESS,
            )
        elif not refused:
            self.message_user(request, "No selected VM had prestart failures.", messages.INFO)

    @admin.action(description="Return to pool", permissions=["return"])
    def return_to_pool(self, request, queryset):
        returned = []
        for vm in queryset:
            if vm.owner_id != request.user.pk and not holds(
                request.user, "pools.return_vmpool", vm
            ):
                self.message_user(
                    request, f"You may not return VM {vm.name} to its pool.", messages.ERROR
                )
                continue
            try:
                services.return_vm(vm, requested_by=request.user)
            except Refused as exc:
                self.message_user(request, exc.message, messages.ERROR)
                continue
            returned.append(vm.name)
        if returned:
            self.message_user(
                request,
                f"Returned {len(returned)} VM(s) to their pools: {', '.join(returned)}.",
                messages.SUCCESS,
            )


extend_admin(VirtualMachine, PoolVmActions, actions=["return_to_pool", "clear_prestart_failures"])
