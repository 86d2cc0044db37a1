"""A task cluster killed (kill -9) while a user's start, a migration and a pool's prestarts
are all half done; another cluster takes over.

Within a minute of the new cluster starting, every interrupted job has failed as
``worker_lost``, nothing is left pending or running, every VM is in a stationary status that
matches what its host reports (a VM whose domain was already running is Up, a migrated VM is
Up where it landed), and the pool is back at its prestarted level.
"""

from __future__ import annotations

import pytest

from hosts import jobs
from hosts.models import Host, Job, JobKind, JobState, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES
from lab.hostview import active_jobs, disagreements, look
from pools.models import VmPool
from pools.monitor import PRESTART
from project.models import Event, EventKind
from tests.conftest import wait_until

pytestmark = pytest.mark.slow

POOL_SIZE = 4
PRESTARTED = 2
HELD_S = 60  # the first cluster must get every job to its hook by then
RECOVERY_S = 60  # the brief the second cluster gets
CLUSTER_ENV = {
    # The ticker, a user's start, a migration and two prestarts hold a worker each at once.
    "Q_WORKERS": "6",
    "CORRAL_TICKER_RUN_SECONDS": "1",
    "VMPOOL_MONITOR_INTERVAL": "2",
    # A loaded 2-core machine must not pass for a dead worker.
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "8",
}

# Holds a job in its hook while the listed VM ids are in the hold file, until the release file
# exists: the first cluster dies with the job there; the second one's runs pass through.
HOLD = """
vm=""
while [ $# -gt 0 ]; do
    if [ "$1" = --vm-id ]; then vm="$2"; fi
    shift
done
[ -e {released} ] && exit 0
grep -qx "$vm" {held} || exit 0
sleep 120
"""


def _hold(add_hook, event: str, vms) -> None:
    held = add_hook.folder / f"held-{event}"
    held.write_text("".join(f"{vm.pk}\n" for vm in vms))
    add_hook(event, "50-hold", HOLD.format(released=add_hook.folder / "released", held=held))


def _at(job_id: int, step: str) -> bool:
    job = Job.objects.get(pk=job_id)
    return job.state == JobState.RUNNING and job.step == step


def _settled(pool: VmPool, vms) -> bool:
    if active_jobs(vms) or disagreements(vms):
        return False
    counts = VmPool.objects.with_counts().get(pk=pool.pk)
    return (counts.running_unassigned, counts.starting_vms) == (PRESTARTED, 0)


def test_a_cluster_killed_mid_start_migration_and_prestart_is_recovered_by_another(
    real_pool,
    running_vm,
    sim_vm,
    hooks_dir,
    task_cluster,
):
    migrant = running_vm()
    source = migrant.host
    starter = sim_vm()
    pool = real_pool(size=POOL_SIZE, prestarted_vms=PRESTARTED)
    pool_vms = list(VirtualMachine.objects.filter(pool=pool).order_by("pool_index"))
    everyone = [migrant, starter, *pool_vms]
    # Prestarts stop before placement, the user's start once its domain runs, the migration
    # once the domain has moved: the three places a job can leave a VM in between.
    _hold(hooks_dir, "vm-pre-start", pool_vms)
    _hold(hooks_dir, "vm-post-start", [starter])
    _hold(hooks_dir, "vm-post-migrate", [migrant])
    start = jobs.submit(JobKind.START, vm=starter)
    migrate = jobs.submit(JobKind.MIGRATE, vm=migrant)
    env = {"CORRAL_HOOKS_DIR": hooks_dir.folder, **CLUSTER_ENV}

    first = task_cluster(**env)

    def prestarts_held() -> list[int]:
        held = Job.objects.filter(
            vm__pool=pool,
            kind=JobKind.START,
            state=JobState.RUNNING,
            step="Running vm-pre-start hooks",
        )
        return list(held.values_list("pk", flat=True))

    def all_held() -> bool:
        return (
            _at(start.pk, "Running vm-post-start hooks")
            and _at(migrate.pk, "Running vm-post-migrate hooks")
            and len(prestarts_held()) == PRESTARTED
        )

    wait_until(
        all_held,
        timeout=HELD_S,
        message=lambda: f"jobs never all held: {active_jobs(everyone)}\n{first.log()[-3000:]}",
    )
    interrupted = [start.pk, migrate.pk, *prestarts_held()]
    migrant.refresh_from_db()
    destination = migrant.host
    assert migrant.status == "migrating" and destination != source

    first.kill()
    (hooks_dir.folder / "released").touch()
    second = task_cluster(**env)

    wait_until(
        lambda: _settled(pool, everyone),
        timeout=RECOVERY_S,
        message=lambda: (
            f"not settled {RECOVERY_S} s after the second cluster started:\n"
            f"jobs: {active_jobs(everyone)}\nVMs: {disagreements(everyone)}\n"
            f"pool: {VmPool.objects.with_counts().values('running_unassigned').get(pk=pool.pk)}"
            f"\n{first.log()[-1500:]}\n--- after the crash ---\n{second.log()[-3000:]}"
        ),
    )

    outcomes = dict(Job.objects.filter(pk__in=interrupted).values_list("pk", "error_code"))
    assert outcomes == {pk: "worker_lost" for pk in interrupted}
    assert not Job.objects.filter(state__in=ACTIVE_JOB_STATES).exists()
    # The user's VM was already running: it is Up, not Down, not started twice.
    starter.refresh_from_db()
    assert starter.status == "up"
    assert look(Host.objects.all()).where(starter) == {starter.host_id: "running"}
    # The migrated VM is Up where it landed, and gone from where it came from.
    migrant.refresh_from_db()
    assert (migrant.status, migrant.host_id, migrant.migrating_to_id) == (
        "up",
        destination.pk,
        None,
    )
    assert look(Host.objects.all()).where(migrant) == {destination.pk: "running"}
    # The pool started its prestarted VMs again, on the second cluster.
    restarted = Job.objects.filter(
        vm__pool=pool, kind=JobKind.START, params__reason=PRESTART, state=JobState.SUCCEEDED
    )
    assert restarted.count() == PRESTARTED
    # Nothing happened outside Corral: the recovery raises no alert about any VM.
    vm_alerts = Event.objects.filter(kind=EventKind.ALERT, object_type="vm")
    assert list(vm_alerts.values_list("message", flat=True)) == []
    assert second.process.poll() is None
