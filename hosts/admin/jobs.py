"""Admin screens for jobs (followed and cancelled here, never made by hand) and the domains on
hosts that Corral does not manage (listed, never touched)."""

from django.contrib import admin, messages
from django.utils.html import format_html

from hosts import jobs
from hosts.admin.clusters import ONLY_VISIBLE
from hosts.models import ExternalDomain, Job, JobJournal, JobState
from project.access.permissions import holds
from project.admin.base import LabelledTabularInline, ScopedAdmin, recent_filter


class JobJournalInline(LabelledTabularInline):
    model = JobJournal
    fields = ["at", "message", "detail"]
    readonly_fields = ["at", "message", "detail"]
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
    search_fields = ["target_name", "error_message", "error_detail", "requested_by__username"]
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
