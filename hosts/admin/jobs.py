"""Admin screens for jobs (followed and cancelled here, never made by hand) and the domains on
hosts that Corral does not manage (listed, never touched)."""

from django.contrib import admin, messages
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html

from hosts import jobs
from hosts.admin.clusters import ONLY_VISIBLE
from hosts.admin.job_result import result_html
from hosts.models import ExternalDomain, Job, JobJournal, JobState
from project.access.permissions import holds
from project.admin.base import ScopedAdmin, recent_filter

# A job's times, and its journal's, are told apart by the second.
TO_THE_SECOND = "Y-m-d H:i:s"


def to_the_second(moment) -> str:
    return date_format(timezone.localtime(moment), TO_THE_SECOND) if moment else "—"


def _moment(field: str, description: str):
    """A read-only column of one of the job's times, to the second."""

    @admin.display(description=description)
    def column(self, obj):
        return to_the_second(getattr(obj, field))

    return column


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
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "kind",
                    "vm",
                    "host",
                    "target_name",
                    "state",
                    "progress_shown",
                    "step",
                    "requested_by",
                    "coalesced",
                    "parameters",
                ]
            },
        ),
        ("Outcome", {"fields": ["outcome", "error_code", "error_message", "error_detail"]}),
        (
            "Times",
            {
                "fields": [
                    "queued",
                    "dispatched",
                    "started",
                    "finished",
                    "took",
                    "heartbeat",
                    "task_worker",
                ]
            },
        ),
    ]
    readonly_fields = [
        *(f.name for f in Job._meta.fields),
        "progress_shown",
        "parameters",
        "outcome",
        "queued",
        "dispatched",
        "started",
        "finished",
        "took",
        "heartbeat",
        "task_worker",
    ]
    actions = ["cancel_jobs"]

    @admin.display(description="progress")
    def progress_bar(self, obj):
        return format_html(
            '<progress max="100" value="{}" title="{}%"></progress>',
            int(obj.progress * 100),
            int(obj.progress * 100),
        )

    @admin.display(description="progress")
    def progress_shown(self, obj):
        return f"{round(obj.progress * 100)} %"

    @admin.display(description="parameters")
    def parameters(self, obj):
        return result_html(obj.params)

    @admin.display(description="result")
    def outcome(self, obj):
        return result_html(obj.result)

    queued = _moment("created_at", "queued")
    dispatched = _moment("dispatched_at", "handed to a worker")
    started = _moment("started_at", "started")
    finished = _moment("finished_at", "finished")
    heartbeat = _moment("heartbeat_at", "last heartbeat")

    @admin.display(description="took")
    def took(self, obj):
        return obj.took or "—"

    @admin.display(description="task worker")
    def task_worker(self, obj):
        """The task worker that ran the job, in words ("process 15415 on vm"): its machine
        and process, as ``project.workers.worker_name`` records them."""
        if not obj.worker:
            return "none yet"
        machine, _, pid = obj.worker.rpartition(":")
        return f"process {pid} on {machine}" if machine and pid.isdigit() else obj.worker

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The job's page, with its journal: one line per row, timed to the second."""
        journal = JobJournal.objects.filter(job_id=object_id if object_id.isdigit() else None)
        extra_context = {**(extra_context or {}), "journal": journal.order_by("id")}
        return super().change_view(request, object_id, form_url, extra_context)

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
