"""Admin console screens for the inventory."""

from django.contrib import admin
from django.utils.html import format_html

from hosts import jobs
from hosts.models import (
    Cluster,
    ExternalDomain,
    Host,
    Job,
    JobJournal,
    JobState,
    Template,
    VirtualMachine,
)
from project.admin_base import ScopedAdmin
from project.db import count_of
from project.permissions import restrict


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
    inlines = [HostInline]
    actions = ["balance_dry_run"]

    @admin.action(description="Show what the balancer would do now (dry run)")
    def balance_dry_run(self, request, queryset):
        from scheduling.balancer import balance_cluster

        for cluster in queryset:
            outcome = balance_cluster(cluster.pk, dry_run=True)
            if outcome["action"] == "migrate":
                text = (
                    f"{cluster.name}: would move {outcome['vm_name']} from {outcome['from']} "
                    f"to one of {', '.join(outcome['candidates'])} ({outcome['reason']})."
                )
            else:
                text = f"{cluster.name}: nothing to move ({outcome['reason']})."
            self.message_user(request, text)

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


@admin.register(Host)
class HostAdmin(ScopedAdmin):
    list_display = [
        "name",
        "cluster",
        "uri",
        "status",
        "reservable",
        "cpus",
        "memory_mb",
        "last_seen_at",
    ]
    list_filter = ["cluster", "status", "reservable"]
    search_fields = ["name", "uri", "description"]
    readonly_fields = [
        "status",
        "status_detail",
        "cpus",
        "memory_mb",
        "cpu_usage_percent",
        "memory_used_mb",
        "last_seen_at",
        "created_at",
        "updated_at",
    ]
    list_select_related = ["cluster"]


@admin.register(Template)
class TemplateAdmin(ScopedAdmin):
    list_display = ["name", "cluster", "vcpus", "memory_mb", "disk_gb", "os_type"]
    list_filter = ["cluster", "os_type"]
    search_fields = ["name", "description"]
    list_select_related = ["cluster"]


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
    list_filter = ["cluster", "status", "power_state", "pool"]
    search_fields = ["name", "description", "uuid", "owner__username"]
    readonly_fields = [
        "uuid",
        "host",
        "status",
        "power_state",
        "power_state_updated_at",
        "power_state_update_count",
        "power_host",
        "created_at",
        "updated_at",
    ]
    list_select_related = ["cluster", "host", "pool", "owner"]
    raw_id_fields = ["owner"]


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
    list_filter = ["state", "kind"]
    search_fields = ["target_name", "error_message", "requested_by__username"]
    list_select_related = ["requested_by"]
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
        allowed = restrict(queryset, request.user, "hosts.cancel_job")
        cancelled = 0
        for job in allowed.filter(state__in=[JobState.PENDING, JobState.RUNNING]):
            jobs.request_cancel(job)
            cancelled += 1
        self.message_user(request, f"Asked {cancelled} job(s) to cancel.")


@admin.register(ExternalDomain)
class ExternalDomainAdmin(ScopedAdmin):
    """Domains on hosts that Corral does not manage: listed, never touched."""

    list_display = ["name", "host", "power_state", "uuid", "first_seen_at", "updated_at"]
    list_filter = ["host", "power_state"]
    search_fields = ["name", "uuid"]
    list_select_related = ["host"]
    readonly_fields = [f.name for f in ExternalDomain._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
