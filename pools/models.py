"""VM pools: sets of identical VMs made from one template, some kept running for instant use."""

import re

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection, models
from django.db.models import Exists, IntegerField, OuterRef, Q
from django.db.models.expressions import RawSQL

from hosts.models import Job, JobKind, Template, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from pools import takeable
from project.db import count_of
from project.names import validate_object_name

MAX_POOL_SIZE = 10_000
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._?-]{0,63}$")


class PoolType(models.TextChoices):
    AUTOMATIC = "automatic", "Automatic (a VM returns to the pool when its user shuts it down)"
    MANUAL = "manual", "Manual (the user keeps the VM until an admin returns it)"


def validate_name_pattern(value: str) -> None:
    if not NAME_PATTERN.match(value):
        raise ValidationError(
            "Use letters, digits, '.', '_', '-' and '?' (a digit of the VM's number), "
            "starting with a letter or digit."
        )
    if "?" in value and not re.search(r"\?+", value):
        raise ValidationError("Put the '?' digits together, as in lab-???.")
    if len(re.findall(r"\?+", value)) > 1:
        raise ValidationError("Use one group of '?' digits, as in lab-???.")


# What counts toward a pool's prestarted level: an unassigned VM nobody holds that runs, or
# is on its way up. oVirt counts the VMs that qualify to migrate (Up, PoweringUp, Paused,
# RebootInProgress); Corral's names for those are Up, Starting and Paused, plus the
# transitional statuses of a VM that keeps running (Resuming, Suspending, Migrating) and
# Unknown (its host is briefly unreachable: the VM most likely still runs). A Stopping VM is
# going away and does not count, nor does a Down one unless a start job is queued for it.
# One definition, used by the monitor, the pool counts, the dashboard and /metrics.
PRESTARTED_STATUSES = (
    VmStatus.UP,
    VmStatus.STARTING,
    VmStatus.PAUSED,
    VmStatus.RESUMING,
    VmStatus.SUSPENDING,
    VmStatus.MIGRATING,
    VmStatus.UNKNOWN,
)


def start_job_active() -> Exists:
    """A VM row has a start job queued or running."""
    return Exists(
        Job.objects.filter(vm=OuterRef("pk"), kind=JobKind.START, state__in=ACTIVE_JOB_STATES)
    )


FREE = Q(owner__isnull=True, admin_hold=False)


def prestarted_condition() -> Q:
    """VM rows that count toward their pool's prestarted level (see PRESTARTED_STATUSES)."""
    return FREE & (Q(status__in=PRESTARTED_STATUSES) | Q(start_job_active()))


class VmPoolQuerySet(models.QuerySet):
    def with_counts(self) -> "VmPoolQuerySet":
        """Annotate total_vms, prestarted_now (what the monitor counts), running_unassigned,
        starting_vms, assigned_vms and held_vms (sub-selects)."""
        vms = VirtualMachine.objects
        return self.annotate(
            total_vms=count_of(vms.all(), "pool"),
            prestarted_now=count_of(vms.filter(prestarted_condition()), "pool"),
            running_unassigned=count_of(vms.filter(FREE, status=VmStatus.UP), "pool"),
            assigned_vms=count_of(vms.filter(owner__isnull=False), "pool"),
            starting_vms=count_of(
                vms.filter(FREE).filter(Q(status=VmStatus.STARTING) | Q(start_job_active())),
                "pool",
            ),
            held_vms=count_of(vms.filter(admin_hold=True), "pool"),
        )

    def with_takeable(self) -> "VmPoolQuerySet":
        """Annotate takeable_vms, how many VMs taking one could hand out now, and ready_vms,
        how many of them it hands out running, at once: what the pick (``pick_free_vm``)
        would take, by its own rule (``pools.takeable``)."""
        quote = connection.ops.quote_name
        pool_id = f"{quote(self.model._meta.db_table)}.{quote(self.model._meta.pk.column)}"
        return self.annotate(
            takeable_vms=RawSQL(*takeable.count_in_pool(pool_id), output_field=IntegerField()),
            ready_vms=RawSQL(
                *takeable.count_in_pool(pool_id, ready=True), output_field=IntegerField()
            ),
        )


class VmPool(models.Model):
    """Identical VMs from one template that users take from (oVirt's VM pools).

    ``prestarted_vms`` of them are kept running and unassigned, so taking one is instant.
    A grant on a pool covers the pool and its VMs.
    """

    name = models.CharField(max_length=64, unique=True, validators=[validate_object_name])
    description = models.TextField(blank=True, max_length=2000)
    cluster = models.ForeignKey("hosts.Cluster", on_delete=models.PROTECT, related_name="pools")
    template = models.ForeignKey("hosts.Template", on_delete=models.PROTECT, related_name="pools")
    type = models.CharField(max_length=16, choices=PoolType.choices, default=PoolType.AUTOMATIC)
    size = models.PositiveIntegerField(
        default=0, validators=[MaxValueValidator(MAX_POOL_SIZE)], help_text="How many VMs."
    )
    prestarted_vms = models.PositiveIntegerField(
        default=0, help_text="How many VMs to keep running and unassigned (at most size)."
    )
    max_user_vms = models.PositiveIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_POOL_SIZE)],
        help_text="How many of the pool's VMs one user may hold.",
    )
    stateless = models.BooleanField(
        default=True, help_text="Every return reverts the VM to its base snapshot."
    )
    name_pattern = models.CharField(
        max_length=64,
        blank=True,
        validators=[validate_name_pattern],
        help_text="VM names: 'lab' gives lab-1, lab-2…; 'lab-???' gives lab-001, lab-002…",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Until when allocations queue no further monitor nudge (``tasks.nudge_monitor``).
    nudge_due_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = VmPoolQuerySet.as_manager()

    grant_scopes = {"pool": "pk", "cluster": "cluster_id"}

    class Meta:
        ordering = ["name"]
        verbose_name = "VM pool"
        permissions = [
            ("allocate_vmpool", "Can take a VM from the pool"),
            ("return_vmpool", "Can return VMs to the pool"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {}
        sized = self.prestarted_vms is not None and self.size is not None
        if sized and self.prestarted_vms > self.size:
            errors["prestarted_vms"] = f"At most the pool's size ({self.size})."
        if self.template_id and self.cluster_id:
            bound = Template.objects.filter(pk=self.template_id).values_list(
                "cluster_id", flat=True
            )
            if bound and bound[0] is not None and bound[0] != self.cluster_id:
                errors["template"] = "This template belongs to another cluster."
        if self.name_pattern:
            width = self.name_pattern.count("?")
            if width and self.size and self.size >= 10**width:
                errors["name_pattern"] = (
                    f"{width} '?' digits number at most {10**width - 1} VMs; the pool has "
                    f"{self.size}."
                )
        if errors:
            raise ValidationError(errors)

    def vm_name(self, number: int) -> str:
        """The name of the pool's VM number ``number`` (from 1)."""
        pattern = self.name_pattern or self.name
        match = re.search(r"\?+", pattern)
        if match is None:
            return f"{pattern}-{number}"
        digits = str(number).zfill(len(match.group()))
        return pattern[: match.start()] + digits + pattern[match.end() :]
