"""Which VMs of a pool are free, prestarted or busy: the querysets allocation, shrinking and the
prestart monitor share."""

from django.db.models import Exists, OuterRef

from hosts.models import Job, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES
from pools.models import FREE, VmPool, prestarted_condition


def active_job(kind: str | None = None):
    """A VM has a job queued or running (of ``kind``, when given)."""
    jobs_on_vm = Job.objects.filter(vm=OuterRef("pk"), state__in=ACTIVE_JOB_STATES)
    if kind is not None:
        jobs_on_vm = jobs_on_vm.filter(kind=kind)
    return Exists(jobs_on_vm)


def free_vms():
    """VMs that no user holds and no admin holds back."""
    return VirtualMachine.objects.filter(FREE)


def unassigned(pool: VmPool):
    """The pool's VMs that no user holds and no admin holds back."""
    return free_vms().filter(pool=pool)


def prestarted():
    """VMs that count toward their pool's prestarted level (``pools.models.PRESTARTED_STATUSES``:
    unassigned, not held, and running, paused, on their way up or unknown)."""
    return VirtualMachine.objects.filter(prestarted_condition())
