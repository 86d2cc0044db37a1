"""Admin console screens for the inventory, jobs and external domains."""

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as confirm_deletion
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from hosts import jobs, services
from hosts.models import (
    Cluster,
    ExternalDomain,
    Host,
    Job,
    JobJournal,
    JobKind,
    JobState,
    Template,
    VirtualMachine,
)
from hosts.usage import Load, load, with_usage
from project.admin_base import ScopedAdmin, recent_filter
from project.db import count_of
from project.errors import Refused
from project.permissions import holds, restrict

ONLY_VISIBLE = admin.RelatedOnlyFieldListFilter  # a filter never names what the user cannot see
HOST_PAGE_ROWS = 50  # VMs and external domains listed on a host's page


class HostInline(admin.TabularInline):
    model = Host
    fields = ["name", "uri", "status", "reservable", "cpus", "memory_mb"]
    readonly_fields = ["status", "cpus", "memory_mb"]
    extra = 0
    show_change_link = True


@admin.register(Cluster)
class ClusterAdmin(ScopedAdmin):
    list_display = ["name", "description", "policy", "host_count", "vm_count"]
    search_fields = ["name", "description"]
    list_select_related = ["policy"]
    inlines = [HostInline]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                host_count=count_of(Host.objects.all(), "cluster"),
                vm_count=count_of(VirtualMachine.objects.all(), "cluster"),
            )
        )

    @admin.display(ordering="host_count", description="hosts")
    def host_count(self, obj):
        return obj.host_count

    @admin.display(ordering="vm_count", description="VMs")
    def vm_count(self, obj):
        return obj.vm_count


def load_bar(figures: Load, resource: str, reported: str = "") -> str:
    """A meter of what VMs were given against what the scheduler may give, with the numbers."""
    if figures.capacity is None:
        return format_html(
            '<span class="corral-load" data-resource="{}">not reported yet</span>', resource
        )
    return format_html(
        '<div class="corral-load" data-resource="{}" data-used="{}" data-capacity="{}">'
        '<div class="meter-line"><meter min="0" max="{}" value="{}" high="{}" '
        'optimum="0" title="{}%">{}%</meter> {} of {} {}</div>'
        '<div class="mini quiet">{}</div></div>',
        resource,
        figures.used,
        figures.capacity,
        figures.capacity,
        min(figures.used, figures.capacity),
        int(figures.capacity * 0.8),
        figures.percent,
        figures.percent,
        figures.used,
        figures.capacity,
        figures.unit,
        reported,
    )


@admin.register(Host)
class HostAdmin(ScopedAdmin):
    list_display = [
        "name",
        "cluster",
        "status",
        "memory_load",
        "cpu_load",
        "running_vm_count",
        "reservable",
        "last_seen_at",
    ]
    list_filter = [("cluster", ONLY_VISIBLE), "status", "reservable"]
    search_fields = ["name", "uri", "description"]
    readonly_fields = [
        "status",
        "status_detail",
        "memory_load",
        "cpu_load",
        "cpus",
        "memory_mb",
        "cpu_usage_percent",
        "memory_used_mb",
        "last_seen_at",
        "created_at",
        "updated_at",
    ]
    list_select_related = ["cluster"]
    actions = ["put_in_maintenance", "activate"]

    def get_queryset(self, request):
        return with_usage(super().get_queryset(request))

    def get_fieldsets(self, request, obj=None):
        main = ["name", "cluster", "uri", "description", "reservable", "networks", "capabilities"]
        if obj is None:
            return [(None, {"fields": main})]
        return [
            (None, {"fields": main}),
            ("Status", {"fields": ["status", "status_detail", "last_seen_at"]}),
            (
                "Capacity and load",
                {
                    "fields": [
                        "memory_load",
                        "cpu_load",
                        "cpus",
                        "memory_mb",
                        "cpu_usage_percent",
                        "memory_used_mb",
                    ]
                },
            ),
            ("Record", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
        ]

    @admin.display(description="memory (given to VMs)")
    def memory_load(self, obj):
        memory, _ = load(obj)
        reported = (
            f"{obj.memory_used_mb} MiB in use on the host" if obj.memory_used_mb is not None else ""
        )
        return load_bar(memory, "memory", reported)

    @admin.display(description="vCPUs (given to VMs)")
    def cpu_load(self, obj):
        _, vcpus = load(obj)
        measured = obj.cpu_usage_percent
        reported = f"host CPU {measured:.0f}%" if measured is not None else ""
        return load_bar(vcpus, "vcpus", reported)

    @admin.display(ordering="running_vms", description="VMs running")
    def running_vm_count(self, obj):
        return obj.running_vms

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), **self._on_host(request, object_id)}
        return super().change_view(request, object_id, form_url, extra_context)

    def _on_host(self, request, object_id) -> dict:
        """The VMs and external domains on the host that the user may see (a page of each)."""
        try:
            host_id = int(object_id)
        except (TypeError, ValueError):
            return {}
        vms = restrict(
            VirtualMachine.objects.filter(host_id=host_id),
            request.user,
            "hosts.view_virtualmachine",
        ).select_related("owner")
        domains = restrict(
            ExternalDomain.objects.filter(host_id=host_id),
            request.user,
            "hosts.view_externaldomain",
        )
        return {
            "host_vms": list(vms.order_by("name")[:HOST_PAGE_ROWS]),
            "host_vm_count": vms.count(),
            "host_vms_url": reverse("admin:hosts_virtualmachine_changelist")
            + f"?host__id__exact={host_id}",
            "host_domains": list(domains.order_by("name")[:HOST_PAGE_ROWS]),
            "host_domain_count": domains.count(),
            "host_domains_url": reverse("admin:hosts_externaldomain_changelist")
            + f"?host__id__exact={host_id}",
        }

    def _each_host(self, request, queryset, verb: str, service):
        for host in queryset:
            if not holds(request.user, "hosts.change_host", host):
                self.message_user(request, f"You may not {verb} host {host.name}.", messages.ERROR)
                continue
            try:
                outcome = service(host, requested_by=request.user)
            except Refused as exc:
                self.message_user(request, exc.message, messages.ERROR)
                continue
            yield host, outcome

    @admin.action(
        description="Put in maintenance (move its running VMs away)", permissions=["change"]
    )
    def put_in_maintenance(self, request, queryset):
        done = self._each_host(request, queryset, "put in maintenance", services.put_in_maintenance)
        for host, migrations in done:
            moving = f"; {len(migrations)} VM(s) migrating away" if migrations else ""
            self.message_user(
                request, f"Host {host.name} is in maintenance{moving}.", messages.SUCCESS
            )

    @admin.action(description="Activate (leave maintenance)", permissions=["change"])
    def activate(self, request, queryset):
        for host, _ in self._each_host(request, queryset, "activate", services.activate_host):
            self.message_user(
                request,
                f"Host {host.name} left maintenance; it is Up once it is read again.",
                messages.SUCCESS,
            )


@admin.register(Template)
class TemplateAdmin(ScopedAdmin):
    list_display = ["name", "cluster", "vcpus", "memory_mb", "disk_gb", "os_type"]
    list_filter = [("cluster", ONLY_VISIBLE), "os_type"]
    search_fields = ["name", "description"]
    list_select_related = ["cluster"]


# Admin action -> (job kind, the action it needs on each VM, what the message calls it).
VM_OPERATIONS = {
    "start": (JobKind.START, "hosts.operate_virtualmachine", "start"),
    "shut_down": (JobKind.SHUTDOWN, "hosts.operate_virtualmachine", "shut down"),
    "power_off": (JobKind.POWEROFF, "hosts.operate_virtualmachine", "power off"),
    "migrate": (JobKind.MIGRATE, "hosts.migrate_virtualmachine", "migrate"),
}


def _vm_operation(name: str, description: str, permission: str):
    kind, action, verb = VM_OPERATIONS[name]

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


@admin.register(VirtualMachine)
class VirtualMachineAdmin(ScopedAdmin):
    list_display = [
        "name",
        "cluster",
        "host",
        "pool",
        "owner",
        "status",
        "power_state",
        "power_state_updated_at",
        "vcpus",
        "memory_mb",
    ]
    list_filter = [
        ("cluster", ONLY_VISIBLE),
        "status",
        "power_state",
        ("pool", ONLY_VISIBLE),
        ("host", ONLY_VISIBLE),
    ]
    search_fields = ["name", "description", "uuid", "owner__username"]
    readonly_fields = [
        "uuid",
        "host",
        "status",
        "power_state",
        "power_state_updated_at",
        "power_state_update_count",
        "power_host",
        "migrating_to",
        "prestart_failures",
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

    def has_operate_permission(self, request):
        return holds(request.user, "hosts.operate_virtualmachine")

    def has_migrate_permission(self, request):
        return holds(request.user, "hosts.migrate_virtualmachine")

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields += self.readonly_on_change
        else:
            fields.append("pool")  # a pool numbers and prepares its own VMs
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

    def save_model(self, request, obj, form, change):
        if change:
            # Only what the form changed: the rest of the row (owner, status, power state)
            # moves under other writers meanwhile, and saving the whole row would put back
            # what the page read.
            changed = form.changed_data
            obj.save(update_fields=[*changed, "updated_at"] if changed else [])
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


class JobJournalInline(admin.TabularInline):
    model = JobJournal
    fields = ["at", "message"]
    readonly_fields = ["at", "message"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(ScopedAdmin):
    """Jobs are made by operations, never by hand; admins follow and cancel them here."""

    list_display = [
        "id",
        "kind",
        "target_name",
        "state",
        "progress_bar",
        "step",
        "requested_by",
        "created_at",
        "finished_at",
        "error_code",
    ]
    list_filter = [
        "state",
        "kind",
        recent_filter("finished_at", "finished", "finished"),
        recent_filter("created_at", "created", "created"),
    ]
    search_fields = ["target_name", "error_message", "requested_by__username"]
    list_select_related = ["requested_by", "vm", "host"]  # a job's name is its VM's or host's
    readonly_fields = [f.name for f in Job._meta.fields]
    inlines = [JobJournalInline]
    actions = ["cancel_jobs"]

    @admin.display(description="progress")
    def progress_bar(self, obj):
        return format_html(
            '<progress max="100" value="{}" title="{}%"></progress>',
            int(obj.progress * 100),
            int(obj.progress * 100),
        )

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request, queryset):
        cancelled = []
        for job in queryset:
            own = job.requested_by_id == request.user.pk
            if not own and not holds(request.user, "hosts.cancel_job", job):
                self.message_user(request, f"You may not cancel job #{job.pk}.", messages.ERROR)
            elif job.state not in (JobState.PENDING, JobState.RUNNING):
                self.message_user(
                    request,
                    f"Job #{job.pk} is {job.get_state_display().lower()}; nothing to cancel.",
                    messages.ERROR,
                )
            else:
                jobs.request_cancel(job)
                cancelled.append(f"#{job.pk}")
        if cancelled:
            self.message_user(
                request,
                f"Asked {len(cancelled)} job(s) to cancel: {', '.join(cancelled)}.",
                messages.SUCCESS,
            )


@admin.register(ExternalDomain)
class ExternalDomainAdmin(ScopedAdmin):
    """Domains on hosts that Corral does not manage: listed, never touched."""

    list_display = ["name", "host", "power_state", "uuid", "first_seen_at", "updated_at"]
    list_filter = [("host", ONLY_VISIBLE), "power_state"]
    search_fields = ["name", "uuid"]
    list_select_related = ["host"]
    readonly_fields = [f.name for f in ExternalDomain._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
