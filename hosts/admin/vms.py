"""Admin screen for VMs: their state, power operations queued as jobs, their snapshots
(``hosts.admin.snapshots``), deletion through the VM service (a VM defined on a host is removed
from it first), and a template made from a VM (``hosts.admin.vm_templates``)."""

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as confirm_deletion
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from hosts import charts, quotas, services, template_access
from hosts.admin import vm_templates
from hosts.admin.clusters import ONLY_VISIBLE
from hosts.admin.day_charts import DayChartsAdmin
from hosts.admin.snapshots import snapshots_on_vm_page
from hosts.guests import ssh
from hosts.models import Job, JobKind, JobState, VirtualMachine
from project.access.permissions import holds
from project.admin.base import ScopedAdmin
from project.errors import Refused

# Admin action -> (job kind, the action it needs on each VM, what the message calls it).
ADMIN_VM_ACTIONS = {
    "start": (JobKind.START, "hosts.operate_virtualmachine", "start"),
    "shut_down": (JobKind.SHUTDOWN, "hosts.operate_virtualmachine", "shut down"),
    "power_off": (JobKind.POWEROFF, "hosts.operate_virtualmachine", "power off"),
    "migrate": (JobKind.MIGRATE, "hosts.migrate_virtualmachine", "migrate"),
}


def _vm_operation(name: str, description: str, permission: str):
    kind, action, verb = ADMIN_VM_ACTIONS[name]

    def run(modeladmin, request, queryset):
        queued = []
        for vm in queryset:
            if not holds(request.user, action, vm):
                modeladmin.message_user(
                    request, f"You may not {verb} VM {vm.name}.", messages.ERROR
                )
                continue
            try:
                job = services.request_operation(vm, kind, requested_by=request.user)
            except Refused as exc:
                modeladmin.message_user(request, exc.message, messages.ERROR)
                continue
            queued.append(f"{vm.name} (job #{job.pk})")
        if queued:
            modeladmin.message_user(
                request,
                f"{verb.capitalize()} queued for {len(queued)} VM(s): {', '.join(queued)}.",
                messages.SUCCESS,
            )

    run.__name__ = name
    return admin.action(description=description, permissions=[permission])(run)


def launch_checked(form_class: type, user) -> type:
    """``form_class`` refusing, on the template field, a new VM of a user's template whose
    images ``user`` may not see (``template_access.launch_refusal``), and on the field of the
    resource, a VM past ``user``'s quota, as the API refuses them."""

    class LaunchCheckedForm(form_class):
        def _post_clean(self):
            super()._post_clean()
            if self._errors or self.instance.template_id is None:
                return
            refusal = template_access.launch_refusal(user, self.instance)
            if refusal is not None:
                self.add_error("template", refusal)
                return
            _say_quota(self, lambda: quotas.charge(user, quotas.for_vm(self.instance)))

    LaunchCheckedForm.__name__ = form_class.__name__
    return LaunchCheckedForm


def growth_checked(form_class: type) -> type:
    """``form_class`` refusing, on its field, a stopped VM's hardware grown past its holder's
    quota (``services.charge_hardware``: only what grows counts)."""

    class GrowthCheckedForm(form_class):
        def _post_clean(self):
            super()._post_clean()
            if self._errors:
                return
            wanted = {n: getattr(self.instance, n) for n in quotas.HARDWARE}
            _say_quota(self, lambda: services.charge_hardware(self.instance, wanted))

    GrowthCheckedForm.__name__ = form_class.__name__
    return GrowthCheckedForm


def _say_quota(form, charge) -> None:
    """Run ``charge`` (a ``quotas.charge`` of what the form asks for) or say its refusal on
    the resource's field. The admin validates a posted form inside the transaction that saves
    it: the user's row stays locked from this check to the save, so two pages posted at once
    never pass a limit together."""
    try:
        charge()
    except quotas.QuotaExceeded as exceeded:
        field = exceeded.resource if exceeded.resource in quotas.HARDWARE else None
        form.add_error(field, exceeded.message)


@admin.register(VirtualMachine)
class VirtualMachineAdmin(DayChartsAdmin, ScopedAdmin):
    list_display = [
        "name",
        "cluster",
        "host",
        "pool",
        "owner",
        "admin_hold",
        "status",
        "power_state",
        "power_state_updated_at",
        "vcpus",
        "memory_mb",
    ]
    list_filter = [
        ("cluster", ONLY_VISIBLE),
        "status",
        "admin_hold",
        "highly_available",
        "power_state",
        ("pool", ONLY_VISIBLE),
        ("host", ONLY_VISIBLE),
    ]
    search_fields = ["name", "description", "uuid", "owner__username", "ip_addresses"]
    readonly_fields = [
        "uuid",
        "host",
        "status",
        "power_state",
        "power_state_updated_at",
        "power_state_update_count",
        "power_host",
        "cpu_usage_percent",
        "migrating_to",
        "prestart_failures",
        "ip_addresses",
        "ssh_command",
        "ssh_keys_in_guest",
        "last_failure",
        "graphics_port",
        "created_at",
        "updated_at",
    ]
    # Set only by the services that keep grants, per-user limits and events right (allocate,
    # return, launch into a lease): shown, never edited on a VM's page.
    readonly_on_change = ["owner", "pool", "reservation", "cluster", "template"]
    list_select_related = ["cluster", "host", "pool", "owner"]
    raw_id_fields = ["owner"]
    actions = [
        "start",
        "shut_down",
        "power_off",
        "migrate",
        "delete_selected",
    ]

    start = _vm_operation("start", "Start", "operate")
    shut_down = _vm_operation("shut_down", "Shut down", "operate")
    power_off = _vm_operation("power_off", "Power off", "operate")
    migrate = _vm_operation("migrate", "Migrate (to a host the scheduler picks)", "migrate")

    @admin.display(description="SSH")
    def ssh_command(self, obj):
        found = ssh.details(obj)
        return found.command if found is not None else "—"

    @admin.display(description="Last failed job")
    def last_failure(self, obj):
        """The VM's last failed job: its message and what the hosts said (libvirt's words)."""
        job = Job.objects.filter(vm=obj, state=JobState.FAILED).order_by("-id").first()
        if job is None:
            return "—"
        link = reverse("admin:hosts_job_change", args=[job.pk])
        return format_html(
            '<a href="{}">#{} {}</a>: {}<pre class="host-words">{}</pre>',
            link,
            job.pk,
            job.get_kind_display(),
            job.error_message or job.error_code,
            job.error_detail or "(no word from a host)",
        )

    @admin.display(description="Its user's SSH keys")
    def ssh_keys_in_guest(self, obj):
        found = ssh.keys_state(obj)
        return found.message if found is not None else "—"

    def get_urls(self):
        own = [
            path(
                "<int:vm_id>/make-template/",
                self.admin_site.admin_view(self.make_template_view),
                name="hosts_virtualmachine_make_template",
            ),
            *self.day_charts_urls(),
        ]
        return own + super().get_urls()

    day_charts_key = "vm"

    def draw_span(self, obj, span) -> str:
        return charts.vm_span(obj, span)

    def make_template_view(self, request, vm_id: int):
        return vm_templates.make_template_view(self, request, vm_id)

    def has_operate_permission(self, request):
        return holds(request.user, "hosts.operate_virtualmachine")

    def has_migrate_permission(self, request):
        return holds(request.user, "hosts.migrate_virtualmachine")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The VM's page draws its last day and lists its snapshots too, for those who may
        operate it, and links to making a template from it for those who may."""
        vm = self.get_object(request, object_id)
        may = vm is not None and vm_templates.may_make_template(request.user, vm)
        extra_context = {
            **(extra_context or {}),
            **snapshots_on_vm_page(request, object_id),
            "may_make_template": may,
        }
        extra_context.update(self.day_charts_context(request, vm))
        return super().change_view(request, object_id, form_url, extra_context)

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields += self.readonly_on_change
        else:
            fields.append("pool")  # a pool numbers and prepares its own VMs
        if obj is None or obj.pool_id is None:
            fields.append("admin_hold")  # only a pool's VMs are held for the admins
        return fields

    @admin.action(
        description="Delete selected VMs (stopped ones; removed from their host first)",
        permissions=["delete"],
    )
    def delete_selected(self, request, queryset):
        if not request.POST.get("post"):
            return confirm_deletion(self, request, queryset)
        deleted = []
        for vm in queryset:
            if not holds(request.user, "hosts.delete_virtualmachine", vm):
                self.message_user(request, f"You may not delete VM {vm.name}.", messages.ERROR)
            elif self._delete(request, vm) == "deleted":
                deleted.append(vm.name)
        if deleted:
            self.message_user(
                request, f"Deleted {len(deleted)} VM(s): {', '.join(deleted)}.", messages.SUCCESS
            )
        return None

    def _delete(self, request, vm) -> str:
        """Delete through the VM service: a running VM is refused (""), a VM no host holds is
        "deleted" at once, one defined on a host is "queued" to be removed from it first."""
        try:
            job = services.delete_vm(vm, requested_by=request.user)
        except Refused as exc:
            self.message_user(request, f"Not deleted: {exc.message}", messages.ERROR)
            return ""
        if job is None:
            return "deleted"
        self.message_user(
            request,
            f"VM {vm.name} is removed from its host by job #{job.pk}, then deleted.",
            messages.SUCCESS,
        )
        return "queued"

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        return growth_checked(form) if obj is not None else launch_checked(form, request.user)

    def save_model(self, request, obj, form, change):
        if change:
            # Only what the form changed: the rest of the row (owner, status, power state)
            # moves under other writers meanwhile, and saving the whole row would put back
            # what the page read.
            # The form charged its hardware's growth (growth_checked), in this transaction.
            changed = [name for name in form.changed_data if name != "admin_hold"]
            obj.save(update_fields=[*changed, "updated_at"] if changed else [])
            if "admin_hold" in form.changed_data:
                # Through its service, which says so in the event feed.
                services.set_admin_hold(obj, obj.admin_hold, requested_by=request.user)
        else:
            # As through the API: the creator may manage the VM; its owner is the one chosen
            # in the form, or the creator.
            chosen = obj.owner
            services.create_vm(obj, created_by=request.user)
            if chosen is not None and chosen != obj.owner:
                VirtualMachine.objects.filter(pk=obj.pk).update(owner=chosen)
                obj.owner = chosen

    def delete_model(self, request, obj):
        if not self._delete(request, obj):
            request._corral_refused = True

    def delete_queryset(self, request, queryset):
        for vm in queryset:
            self._delete(request, vm)

    def response_delete(self, request, obj_display, obj_id):
        if getattr(request, "_corral_refused", False):
            return HttpResponseRedirect(reverse("admin:hosts_virtualmachine_change", args=[obj_id]))
        return super().response_delete(request, obj_display, obj_id)
