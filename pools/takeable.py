"""Which of a pool's VMs taking one hands out, and in which order: the one rule, written once as
SQL, that both the pick (``pools.queries.pick_free_vm``) and the counts the portal's pool cards
and the API's pools show (``VmPoolQuerySet.with_takeable``) run. So whatever is shown ready to
take is what an allocation takes, and an allocation takes nothing else.

SQL rather than ORM expressions because the pick is one hand-written statement, for speed (see
its docstring); the counts embed the same text, about the VM row aliased ``v``.
"""

from __future__ import annotations

from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES

# Jobs that leave a VM as its taker gets it: they change neither its power state nor its disks
# (a ``guest_keys`` job rewrites a running guest's authorized_keys, and may wait up to
# CORRAL_GUEST_KEYS_WAIT for its agent). A VM with only these queued or running is as free as
# one with none: the allocation supersedes them (``hosts.guests.keys.supersede``). Any other
# job but a start keeps a VM from being handed out.
PASSING_JOB_KINDS = (JobKind.GUEST_KEYS,)

# The order allocation prefers free VMs in: running, then being started, then stopped.
UP, STARTING, DOWN = 0, 1, 2

Sql = tuple[str, list]


def _working(kind: str = "") -> Sql:
    """SQL selecting the queued or running jobs on VM ``v`` that change it (every kind but the
    passing ones), or only those of ``kind`` ("start", or "not start")."""
    states, passing = list(ACTIVE_JOB_STATES), list(PASSING_JOB_KINDS)
    sql = (
        f"SELECT 1 FROM {Job._meta.db_table} j WHERE j.vm_id = v.id"
        f" AND j.state IN ({', '.join(['%s'] * len(states))})"
        f" AND j.kind NOT IN ({', '.join(['%s'] * len(passing))})"
    )
    params = [*states, *passing]
    if kind == "start":
        return sql + " AND j.kind = %s", [*params, JobKind.START]
    if kind == "not start":
        return sql + " AND j.kind <> %s", [*params, JobKind.START]
    return sql, params


def takeable() -> Sql:
    """VM ``v`` can be handed out now: no user or admin holds it, and it is running or stopped
    with no job that changes it, or is being started with no other such job."""
    working, working_params = _working()
    start, start_params = _working("start")
    other, other_params = _working("not start")
    return (
        "v.owner_id IS NULL AND NOT v.admin_hold AND ("
        f"(v.status IN (%s, %s) AND NOT EXISTS ({working}))"
        f" OR (EXISTS ({start}) AND NOT EXISTS ({other})))",
        [VmStatus.UP, VmStatus.DOWN, *working_params, *start_params, *other_params],
    )


def preference() -> Sql:
    """How a takeable VM ``v`` would be handed out: UP (running: at once), STARTING (with the
    start under way) or DOWN (a start is queued for it)."""
    working, params = _working()
    return (
        f"CASE WHEN NOT EXISTS ({working}) THEN"
        f" (CASE WHEN v.status = %s THEN {UP} ELSE {DOWN} END)"
        f" ELSE {STARTING} END",
        [*params, VmStatus.UP],
    )


def passing_jobs() -> Sql:
    """VM ``v`` has a passing job (``PASSING_JOB_KINDS``) queued or running."""
    states, passing = list(ACTIVE_JOB_STATES), list(PASSING_JOB_KINDS)
    return (
        f"EXISTS (SELECT 1 FROM {Job._meta.db_table} j WHERE j.vm_id = v.id"
        f" AND j.state IN ({', '.join(['%s'] * len(states))})"
        f" AND j.kind IN ({', '.join(['%s'] * len(passing))}))",
        [*states, *passing],
    )


def count_in_pool(pool_column: str, *, ready: bool = False) -> Sql:
    """SQL counting the takeable VMs of the pool whose id is ``pool_column`` (an outer query's
    column); with ``ready``, only those handed out running, at once (preference UP)."""
    where, params = takeable()
    sql = (
        f"SELECT COUNT(*) FROM {VirtualMachine._meta.db_table} v"
        f" WHERE v.pool_id = {pool_column} AND {where}"
    )
    if ready:
        order, order_params = preference()
        sql, params = f"{sql} AND ({order}) = {UP}", [*params, *order_params]
    return sql, params
