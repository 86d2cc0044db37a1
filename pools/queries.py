"""Which VMs of a pool are free, prestarted or busy: the querysets allocation, shrinking and the
prestart monitor share."""

from django.db import connection
from django.db.models import Exists, OuterRef

from hosts import quotas
from hosts.models import Job, JobKind, Template, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES
from pools import takeable
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


def _pick_sql(pool: VmPool, user, lock: str) -> tuple[str, list]:
    """The pick as one SELECT (see ``pick_free_vm``) and its parameters, ``lock`` appended
    ("" on SQLite). Which VMs qualify, and in which order, is ``pools.takeable``'s rule: the
    one the pool counts shown to users run too.

    Written out rather than built by the ORM: it runs on every allocation, and building the
    same query from expressions cost more Python time than the database spends on it.
    """
    vms, jobs = VirtualMachine._meta.db_table, Job._meta.db_table
    templates = Template._meta.db_table
    where, where_params = takeable.takeable()
    order, order_params = takeable.preference()
    passing, passing_params = takeable.passing_jobs()
    usage, usage_params = quotas.vm_usage_columns(user)
    states = list(ACTIVE_JOB_STATES)
    sql = (
        f"SELECT v.*,"
        f" (SELECT j.id FROM {jobs} j WHERE j.vm_id = v.id AND j.kind = %s"
        f"  AND j.state IN (%s, %s, %s) ORDER BY j.id LIMIT 1) AS start_job_id,"
        f" (SELECT COUNT(*) FROM {vms} h WHERE h.pool_id = %s AND h.owner_id = %s) AS held,"
        f" t.login_user AS template_login_user, t.guest_agent AS template_guest_agent,"
        f" (t.guest_agent AND t.login_user <> '') AS pushes_keys,"
        f" {passing} AS passing_jobs,"
        f" {usage},"
        f" {order} AS preference"
        f" FROM {vms} v LEFT JOIN {templates} t ON t.id = v.template_id"
        f" WHERE v.pool_id = %s AND {where}"
        f" ORDER BY preference, v.pool_index, v.id LIMIT 1{lock}"
    )
    params = [
        JobKind.START, *states,  # start_job_id
        pool.pk, user.pk,  # held
        *passing_params, *usage_params, *order_params,
        pool.pk, *where_params,
    ]  # fmt: skip
    return sql, params


def pick_free_vm(pool: VmPool, user) -> VirtualMachine | None:
    """Lock and return the VM of the pool to hand out to ``user``, or None when none is free.

    Free VMs (no user, no admin hold) that are running with no job, being started with no
    other job, or stopped with no job (``pools.takeable``), preferred in that order
    (``preference``: UP, STARTING, DOWN) and then by number; one being started comes with the
    ``start_job_id`` of that start.
    A job that changes nothing the taker gets (``pools.takeable.PASSING_JOB_KINDS``: putting
    SSH keys in the guest) counts as none; ``passing_jobs`` says the VM has one, for the
    allocation to supersede. ``held`` counts the pool's VMs ``user`` holds, read in the same
    statement, so after the caller's lock on the user, as is all they hold against their
    quota (``quota_vms``, ``quota_vcpus``…, ``hosts.quotas.vm_usage_columns``);
    ``pushes_keys`` says its template has running guests take SSH keys through their agent
    (``template_login_user`` and ``template_guest_agent`` carry what the answer's key state
    needs of the template, so it is not read again).
    One statement whatever the pool's size (three when it waits).

    ``SKIP LOCKED`` lets concurrent allocations pass each other. But a free VM may be locked
    by another writer that does not take it (the sync updating its status, a job being
    queued): skipping it would refuse with "no free VM" while one is. So when the skipping
    pass finds nothing, a second pass waits for the locks, and once they are released the
    skipping pick runs again, as of then: a VM taken meanwhile no longer matches, and one the
    holder queued a prestart on is handed out as being started with that job. (The waiting
    pass read the jobs as they were before it waited; ``submit_many`` locks VM rows and
    changes none, so nothing makes it read them again, and the VM would be started twice.)
    """

    def pick(lock: str) -> VirtualMachine | None:
        return _first(*_pick_sql(pool, user, lock))

    if not connection.features.has_select_for_update_skip_locked:
        return pick("")
    found = pick(" FOR UPDATE OF v SKIP LOCKED")
    if found is not None or pick(" FOR UPDATE OF v") is None:
        return found
    # Now: the rows this transaction holds are not skipped.
    return pick(" FOR UPDATE OF v SKIP LOCKED")


def _first(sql: str, params: list) -> VirtualMachine | None:
    found = list(VirtualMachine.objects.raw(sql, params))
    return found[0] if found else None
