"""Jobs: every change to a VM is one, run by a task worker step by step; and external domains."""

from django.conf import settings
from django.db import models

from hosts.models.inventory import PowerState


class JobKind(models.TextChoices):
    START = "start", "Start"
    SHUTDOWN = "shutdown", "Shut down"
    POWEROFF = "poweroff", "Power off"
    SUSPEND = "suspend", "Suspend"
    RESUME = "resume", "Resume"
    MIGRATE = "migrate", "Migrate"
    DELETE = "delete", "Delete"
    PREPARE = "prepare", "Prepare (define and take the base snapshot)"
    REVERT = "revert", "Revert to the base snapshot"
    NOOP = "noop", "No-op (steps only)"
    COPY_IMAGE = "copy_image", "Copy an image to a host"
    DELETE_IMAGE = "delete_image", "Delete an image's copy on a host"
    FAILOVER = "failover", "Restart a lost host's VMs elsewhere"
    GUEST_KEYS = "guest_keys", "Put its holder's SSH keys in the guest"
    SNAPSHOT = "snapshot", "Take a snapshot"
    SNAPSHOT_REVERT = "snapshot_revert", "Revert to a snapshot"
    SNAPSHOT_DELETE = "snapshot_delete", "Delete a snapshot"
    IMAGE_FROM_VM = "image_from_vm", "Make an image of its disk"


class JobState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLING = "cancelling", "Cancelling"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_JOB_STATES = (JobState.PENDING, JobState.RUNNING, JobState.CANCELLING)
RUNNING_JOB_STATES = (JobState.RUNNING, JobState.CANCELLING)
FINISHED_JOB_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class Job(models.Model):
    """One operation on one VM (or host): its progress, journal, outcome and who asked.

    Jobs on the same VM run one at a time in the order they were submitted; the worker
    running one heartbeats it, and a job whose heartbeat goes stale is failed by the reaper.
    """

    kind = models.CharField(max_length=16, choices=JobKind.choices)
    vm = models.ForeignKey(
        "hosts.VirtualMachine",
        verbose_name="VM",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
    )
    target_name = models.CharField(
        max_length=255, blank=True, help_text="The VM's or host's name, kept after it is deleted."
    )
    host = models.ForeignKey(
        "hosts.Host", on_delete=models.CASCADE, null=True, blank=True, related_name="jobs"
    )
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    progress = models.FloatField(default=0.0)
    step = models.CharField(max_length=120, blank=True)
    result = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    error_detail = models.TextField(
        blank=True,
        help_text="The hosts' own words behind the failure (their URIs, libvirt's text), for "
        "those who may see the hosts: the admin console, and the API and portal to them.",
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
    )
    coalesced = models.PositiveIntegerField(
        default=0, help_text="Identical requests answered by this job while it was pending."
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)

    # A job is seen by whoever may see its VM (or host's cluster); its requester always sees it.
    grant_scopes = {
        "vm": "vm_id",
        "cluster": ("vm__cluster_id", "host__cluster_id"),
        "pool": "vm__pool_id",
    }

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["vm", "state"]), models.Index(fields=["state"])]
        permissions = [("cancel_job", "Can cancel jobs")]

    def __str__(self) -> str:
        target = self.vm or self.host
        return f"{self.get_kind_display()} {target} (#{self.pk})"

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_JOB_STATES

    @property
    def took(self) -> str:
        """How long a finished job ran (from its start, or from its queueing if it never
        started), as people say it: "3 s", "2 min 5 s", "1 h 4 min"; "" while it runs."""
        if self.finished_at is None:
            return ""
        seconds = round((self.finished_at - (self.started_at or self.created_at)).total_seconds())
        minutes, seconds = divmod(max(seconds, 0), 60)
        hours, minutes = divmod(minutes, 60)
        if hours:
            return f"{hours} h {minutes} min"
        if minutes:
            return f"{minutes} min {seconds} s"
        return f"{seconds} s"


class JobJournal(models.Model):
    """A line in a job's journal: what it did, when."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="journal")
    at = models.DateTimeField(auto_now_add=True)
    message = models.TextField()
    detail = models.TextField(
        blank=True,
        help_text="The host's own words behind this line (its URI, libvirt's text), for the "
        "admins: shown in the admin console and the server log, not to the VM's users.",
    )

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.message


class ExternalDomain(models.Model):
    """A domain found on a host that Corral does not manage: listed for admins, never touched."""

    host = models.ForeignKey(
        "hosts.Host", on_delete=models.CASCADE, related_name="external_domains"
    )
    uuid = models.UUIDField()
    name = models.CharField(max_length=255)
    power_state = models.CharField(max_length=16, choices=PowerState.choices, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, help_text="When its state last changed.")

    grant_scopes = {"cluster": "host__cluster_id"}

    class Meta:
        ordering = ["host", "name"]
        constraints = [
            models.UniqueConstraint(fields=["host", "uuid"], name="external_domain_once_per_host")
        ]

    def __str__(self) -> str:
        return f"{self.name} on {self.host}"
