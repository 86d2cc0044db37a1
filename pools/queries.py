"""Which VMs of a pool are free, prestarted or busy: the querysets allocation, shrinking and the
prestart monitor share."""

from django.db.models import Exists, OuterRef, Q

from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from pools.models import VmPool


def active_job(kind: str | None = None):
    """A VM has a job queued or running (of ``kind``, when given)."""
    jobs_on_vm = Job.objects.filter(vm=OuterRef("pk"), state__in=ACTIVE_JOB_STATES)
    if kind is not None:
        jobs_on_vm = jobs_on_vm.filter(kind=kind)
    return Exists(jobs_on_vm)


def free_vms():
    """VMs that no user holds and no admin holds back."""
    return VirtualMachine.objects.filter(owner__isnull=True, admin_hold=False)


def unassigned(pool: VmPool):
    """The pool's VMs that no user holds and no admin holds back."""
    return free_vms().filter(pool=pool)


def prestarted():
    """Unassigned VMs that are Up, or on their way up (a start job pending or running)."""
    return free_vms().filter(
        Q(status__in=[VmStatus.UP, VmStatus.STARTING]) | Q(active_job(JobKind.START))
    )
