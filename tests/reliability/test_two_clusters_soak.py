"""Two task clusters at once through a stretch of ordinary use: a driver takes VMs from a pool,
starts, stops and returns them, and creates short leases (each starts and ends during the run)
and launches a VM into each, through a real web server, while a watcher samples the ticker's
loop lock and the pool.

Each periodic loop runs once per tick whichever cluster holds the ticker:
- the ticker's lock passes from holder to holder, on both clusters, and no holder ever gets
  it back after another took it (the watcher's samples);
- no VM ever has two start jobs at once, nor two jobs running at once (the job rows);
- the prestart monitor never keeps more VMs ready than the pool asks for (the watcher counts
  them in one query at a time);
- every lease is started, warned and ended exactly once, in that order (its lease events and
  one event of each in the feed), and its VM is stopped when it ends;
- no alert is raised besides the leases' warnings (nothing changed outside Corral), every
  job ends, and each VM is what its host says it is.

The full scenario lasts ten minutes; CI runs a bounded stretch (CORRAL_SOAK_SECONDS, 45 s by
default). For the full run, on PostgreSQL:

    CORRAL_SOAK_SECONDS=600 DATABASE_URL=postgres://postgres@127.0.0.1:5432/corral \\
        .venv/bin/pytest -m slow tests/reliability/test_two_clusters_soak.py

CORRAL_SOAK_SEED changes the driver's choices (7 by default).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import timedelta
from itertools import pairwise

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from hosts import driver
from hosts.models import Host, Job, JobKind, JobState, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.sync import status_for
from leases.models import EventStatus, EventType, Lease, LeaseEvent, LeaseStatus
from pools.models import VmPool
from project.access.grants import grant_role, scope_object
from project.models import Event, EventKind, LoopLock, Role
from project.ticker import TICKER_LOCK
from tests.conftest import unique, wait_until
from tests.reliability.conftest import token_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
        reason="two task clusters working at once need PostgreSQL (row locks, SKIP LOCKED); "
        "SQLite has a single writer",
    ),
]

User = get_user_model()
SOAK_S = float(os.environ.get("CORRAL_SOAK_SECONDS", "45"))
SEED = int(os.environ.get("CORRAL_SOAK_SEED", "7"))
POOL_SIZE = 8
PRESTARTED = 3
POOL_USERS = 5
SETTLE_S = 150
# A lease event runs at the first tick after its time; the ticker changing hands (and a loaded
# machine) may delay it a few seconds, never a whole ticker run of the chain's revival.
LATE_S = 20
WATCH_EVERY_S = 0.2
CLUSTER_ENV = {
    "Q_WORKERS": "2",
    # Short ticker runs, so the ticker changes hands between the clusters many times.
    "CORRAL_TICKER_RUN_SECONDS": "2",
    "VMPOOL_MONITOR_INTERVAL": "2",
    # A loaded 2-core machine must not pass for a dead worker or a stuck scheduler.
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "60",
    "CORRAL_SCHEDULER_LOCK_TIMEOUT": "60",
}
# What each request of the driver may be answered; anything else fails the test.
EXPECTED = {
    "allocate": {200, 409},
    "return": {202},
    "start": {202},
    "shutdown": {202},
    "poweroff": {202},
    "lease": {201},
    "launch": {201},
}


@dataclass
class Answer:
    action: str
    status: int | None
    body: object


@dataclass
class Ready:
    """A VM of the pool that counts as prestarted: unassigned and up (with no job taking it
    down), or being started."""

    pool: VmPool

    def count(self) -> int:
        active = Job.objects.filter(vm=OuterRef("pk"), state__in=ACTIVE_JOB_STATES)
        up_and_idle = Q(status=VmStatus.UP) & ~Exists(active.exclude(kind=JobKind.START))
        starting = Q(status=VmStatus.STARTING) | Exists(active.filter(kind=JobKind.START))
        return (
            VirtualMachine.objects.filter(pool=self.pool, owner__isnull=True, admin_hold=False)
            .filter(up_and_idle | starting)
            .count()
        )


class Watcher(threading.Thread):
    """Samples, on its own connection, who holds the ticker and how many VMs are ready."""

    def __init__(self, pool: VmPool, clusters):
        super().__init__(name="soak-watcher", daemon=True)
        self.ready = Ready(pool)
        self.limit = pool.prestarted_vms
        self.groups = {cluster.process.pid: index for index, cluster in enumerate(clusters)}
        self.stopping = threading.Event()
        self.holders: list[str] = []  # each change of holder, in order
        self.cluster_of: dict[str, int | None] = {}
        self.over: list[tuple[float, int]] = []
        self.samples = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.wait(WATCH_EVERY_S):
                self.sample()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()

    def sample(self) -> None:
        holder = LoopLock.objects.filter(name=TICKER_LOCK).values_list("holder", flat=True).first()
        if holder and (not self.holders or self.holders[-1] != holder):
            self.holders.append(holder)
            self.cluster_of.setdefault(holder, self._cluster(holder))
        ready = self.ready.count()
        if ready > self.limit:
            self.over.append((time.monotonic(), ready))
        self.samples += 1

    def _cluster(self, holder: str) -> int | None:
        """Which task cluster the holder's worker belongs to (its process group)."""
        try:
            return self.groups.get(os.getpgid(int(holder.split(":")[-2])))
        except (ProcessLookupError, ValueError, IndexError):
            return None


class Driver(threading.Thread):
    """Ordinary use through the API, one request at a time, chosen at random from what the
    database says is possible: take, start, stop and return pool VMs; create short leases and
    launch a VM into each once it starts."""

    def __init__(self, url: str, pool: VmPool, pool_users, lease_users, template_id, seconds):
        super().__init__(name="soak-driver", daemon=True)
        self.url = url
        self.pool = pool
        self.pool_users = pool_users
        self.lease_users = lease_users
        self.template_id = template_id
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.rng = random.Random(SEED)
        self.headers = {u.pk: token_for(u) for u in pool_users + lease_users}
        self.answers: list[Answer] = []
        self.leases: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.ends = time.monotonic() + self.seconds
            next_lease = time.monotonic() + 1
            while time.monotonic() < self.ends:
                if not self.launch_into_a_started_lease():
                    if time.monotonic() >= next_lease:
                        self.create_lease()
                        next_lease = time.monotonic() + self.rng.uniform(3, 6)
                    else:
                        self.use_the_pool()
                time.sleep(self.rng.uniform(0.1, 0.5))
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()

    def post(self, action: str, path: str, user_id: int, body: dict | None = None) -> Answer:
        try:
            response = requests.post(
                f"{self.url}{path}", json=body, headers=self.headers[user_id], timeout=60
            )
        except requests.RequestException as exc:
            answer = Answer(action, None, repr(exc))
        else:
            try:
                payload = response.json()
            except ValueError:
                payload = response.text[:500]
            answer = Answer(action, response.status_code, payload)
        self.answers.append(answer)
        return answer

    # -- the pool -------------------------------------------------------------------------

    def use_the_pool(self) -> None:
        idle = (
            VirtualMachine.objects.filter(pool=self.pool, owner__in=self.pool_users)
            .filter(~Exists(Job.objects.filter(vm=OuterRef("pk"), state__in=ACTIVE_JOB_STATES)))
            .values_list("pk", "owner_id", "status")
        )
        held = list(idle)
        choices = ["allocate"] * 3
        if held:
            choices += ["return"] * 2 + ["power"] * 4
        choice = self.rng.choice(choices)
        if choice == "allocate":
            user = self.rng.choice(self.pool_users)
            self.post("allocate", f"/api/vmpools/{self.pool.pk}/allocatevm/", user.pk)
            return
        vm_id, owner_id, status = self.rng.choice(held)
        if choice == "return" and status in (VmStatus.UP, VmStatus.DOWN):
            self.post("return", f"/api/vms/{vm_id}/return/", owner_id)
        elif status == VmStatus.DOWN:
            self.post("start", f"/api/vms/{vm_id}/start/", owner_id)
        elif status == VmStatus.UP:
            operation = self.rng.choice(["shutdown", "poweroff"])
            self.post(operation, f"/api/vms/{vm_id}/{operation}/", owner_id)

    # -- leases ---------------------------------------------------------------------------

    def create_lease(self) -> None:
        """A lease of one small instance that starts in a few seconds and lasts a few more,
        ending before the run does."""
        now = timezone.now()
        start = now + timedelta(seconds=self.rng.uniform(1, 4))
        end = start + timedelta(seconds=self.rng.uniform(6, 12))
        if time.monotonic() + (end - now).total_seconds() > self.ends:
            return
        before_end = end - timedelta(seconds=self.rng.uniform(1, 3))
        user = self.rng.choice(self.lease_users)
        body = {
            "name": unique("soak-lease"),
            "start_date": start.isoformat(),
            "end_date": end.isoformat(),
            "before_end_date": before_end.isoformat(),
            "reservations": [
                {
                    "resource_type": "virtual:instance",
                    "vcpus": 1,
                    "memory_mb": 128,
                    "disk_gb": 1,
                    "amount": 1,
                }
            ],
        }
        answer = self.post("lease", "/api/leases/", user.pk, body)
        if answer.status == 201:
            self.leases.append(answer.body["id"])

    def launch_into_a_started_lease(self) -> bool:
        """Launch and start a VM in an active lease that has none yet and a while left."""
        soon = timezone.now() + timedelta(seconds=5)
        lease = (
            Lease.objects.filter(pk__in=self.leases, status=LeaseStatus.ACTIVE, end_date__gt=soon)
            .exclude(reservations__vms__isnull=False)
            .first()
        )
        if lease is None:
            return False
        body = {
            "name": unique("soak-leased"),
            "template": self.template_id,
            "reservation": lease.reservations.get().pk,
        }
        launched = self.post("launch", "/api/vms/", lease.owner_id, body)
        if launched.status == 201:
            self.post("start", f"/api/vms/{launched.body['id']}/start/", lease.owner_id)
        return True


def _users_for_pool(pool: VmPool, count: int) -> list:
    group = Group.objects.create(name=unique("soak-takers"))
    users = User.objects.bulk_create(User(username=unique("taker")) for _ in range(count))
    group.user_set.add(*users)
    grant_role(Role.objects.get(name="UserRole"), pool, group=group)
    return list(User.objects.filter(groups=group).order_by("pk"))


def _lease_users(count: int) -> list:
    users = [User.objects.create(username=unique("leaser")) for _ in range(count)]
    for user in users:
        grant_role(Role.objects.get(name="LeaseUser"), scope_object("system", None), user=user)
    return users


def _settled(pool: VmPool, lease_ids: list[int]) -> bool:
    """Nothing left to happen: no job queued or running, every lease event carried out, every
    VM in a stationary status and the pool at its prestarted level (or every free VM up)."""
    if Job.objects.filter(state__in=ACTIVE_JOB_STATES).exists():
        return False
    due = LeaseEvent.objects.filter(lease_id__in=lease_ids).exclude(status=EventStatus.DONE)
    if due.exists():
        return False
    if VirtualMachine.objects.exclude(
        status__in=[VmStatus.DOWN, VmStatus.UP, VmStatus.PAUSED]
    ).exists():
        return False
    free = VirtualMachine.objects.filter(pool=pool, owner__isnull=True, admin_hold=False).count()
    counts = VmPool.objects.with_counts().get(pk=pool.pk)
    return counts.running_unassigned >= min(pool.prestarted_vms, free)


def _report(clusters, server):
    def text() -> str:
        jobs = Job.objects.exclude(state=JobState.SUCCEEDED).order_by("pk")
        lines = [f"{j.pk} {j.kind} {j.state} vm={j.vm_id} {j.error_message}" for j in jobs]
        events = LeaseEvent.objects.exclude(status=EventStatus.DONE).values_list(
            "lease__name", "event_type", "status", "time"
        )
        statuses = Counter(VirtualMachine.objects.values_list("status", flat=True))
        logs = "\n".join(c.log()[-2000:] for c in clusters)
        return (
            f"jobs not succeeded: {lines}\nlease events not done: {list(events)}\n"
            f"VMs: {statuses}\n{logs}\n{server.log()[-1500:]}"
        )

    return text


def _overlapping(intervals: list[tuple]) -> list[tuple]:
    """Pairs of (start, end, job id) intervals that overlap."""
    ordered = sorted(intervals)
    return [(a[2], b[2]) for a, b in pairwise(ordered) if b[0] < a[1]]


def test_two_task_clusters_run_each_periodic_loop_once_per_tick_through_a_stretch_of_use(
    real_pool, sim_hosts, make_template, task_cluster, web_server
):
    # sim-3 holds the leases' capacity; the pool's VMs run on sim-1 and sim-2.
    Host.objects.filter(pk=sim_hosts[2].pk).update(reservable=True)
    pool = real_pool(
        size=POOL_SIZE,
        prestarted_vms=PRESTARTED,
        max_user_vms=2,
        type="manual",
        stateless=True,
    )
    lease_template = make_template(cluster=None, vcpus=1, memory_mb=128, disk_gb=1)
    clusters = [task_cluster(**CLUSTER_ENV), task_cluster(**CLUSTER_ENV)]
    server = web_server()
    report = _report(clusters, server)
    wait_until(lambda: _settled(pool, []), timeout=SETTLE_S, message=report)

    watcher = Watcher(pool, clusters)
    drive = Driver(
        url=server.url,
        pool=pool,
        pool_users=_users_for_pool(pool, POOL_USERS),
        lease_users=_lease_users(2),
        template_id=lease_template.pk,
        seconds=SOAK_S,
    )
    watcher.start()
    drive.start()
    drive.join(SOAK_S + 120)
    assert not drive.is_alive(), "the driver did not finish"
    wait_until(lambda: _settled(pool, drive.leases), timeout=SETTLE_S, message=report)
    watcher.stopping.set()
    watcher.join(30)
    assert (drive.error, watcher.error) == (None, None)

    # Every request was answered as the API promises, and the run did some of everything.
    unexpected = [a for a in drive.answers if a.status not in EXPECTED[a.action]]
    assert unexpected == [], report()
    done = Counter(a.action for a in drive.answers if a.status in (200, 201, 202))
    assert {"allocate", "return", "start", "lease", "launch"} <= set(done), done
    assert done["shutdown"] + done["poweroff"] > 0, done
    assert len(drive.leases) >= min(3, int(SOAK_S // 10)), done

    # The ticker went from holder to holder, on both clusters, and never back.
    holders = watcher.holders
    assert len(holders) == len(set(holders)), holders
    assert {watcher.cluster_of[h] for h in holders} == {0, 1}, watcher.cluster_of
    assert watcher.samples >= SOAK_S / (WATCH_EVERY_S * 10)

    # The prestart monitor never kept more VMs ready than the pool asks for.
    assert watcher.over == []

    # Each lease event happened once, on time, in order; each lease's VM stopped at its end.
    for lease in Lease.objects.filter(pk__in=drive.leases):
        events = {e.event_type: e for e in LeaseEvent.objects.filter(lease=lease)}
        assert {t: e.status for t, e in events.items()} == {
            EventType.START: EventStatus.DONE,
            EventType.BEFORE_END: EventStatus.DONE,
            EventType.END: EventStatus.DONE,
        }
        late = {t: (e.done_at - e.time).total_seconds() for t, e in events.items()}
        assert all(0 <= s <= LATE_S for s in late.values()), (lease.name, late)
        feed = list(
            Event.objects.filter(lease_id=lease.pk).order_by("pk").values_list("message", flat=True)
        )
        kinds = ("started", "ends at", "ended")
        said = [k for m in feed for k in kinds if m.startswith(f"Lease {lease.name} {k}")]
        assert said == ["started", "ends at", "ended"], feed
        assert lease.status == LeaseStatus.TERMINATED
        for vm in VirtualMachine.objects.filter(reservation__lease=lease):
            assert vm.status == VmStatus.DOWN, (lease.name, vm.name, vm.status)

    # Nothing changed behind Corral's back: the only alerts are the leases' warnings.
    alerts = Event.objects.filter(kind=EventKind.ALERT).values_list("message", flat=True)
    assert [m for m in alerts if " ends at " not in m] == []

    # Every job succeeded (but the start of a lease's VM that came after its lease ended, which
    # must be refused); on no VM did two start jobs, or two running jobs, overlap.
    jobs = list(Job.objects.select_related("vm__reservation").order_by("pk"))
    ended = dict(
        LeaseEvent.objects.filter(event_type=EventType.END).values_list("lease_id", "done_at")
    )

    def too_late(job: Job) -> bool:
        reservation = job.vm.reservation if job.vm else None
        end = ended.get(reservation.lease_id) if reservation else None
        started = job.started_at
        return job.kind == JobKind.START and None not in (end, started) and started >= end

    failed = [j for j in jobs if j.state != JobState.SUCCEEDED and not too_late(j)]
    assert [(j.pk, j.kind, j.state, j.error_message) for j in failed] == []
    by_vm = defaultdict(list)
    for job in jobs:
        by_vm[job.vm_id].append(job)
    starts_at_once = {
        vm_id: _overlapping(
            [(j.created_at, j.finished_at, j.pk) for j in vm_jobs if j.kind == JobKind.START]
        )
        for vm_id, vm_jobs in by_vm.items()
    }
    assert {vm_id: pairs for vm_id, pairs in starts_at_once.items() if pairs} == {}
    runs_at_once = {
        vm_id: _overlapping([(j.started_at, j.finished_at, j.pk) for j in vm_jobs if j.started_at])
        for vm_id, vm_jobs in by_vm.items()
    }
    assert {vm_id: pairs for vm_id, pairs in runs_at_once.items() if pairs} == {}

    # The pool ends at its level, and every VM is what its host says it is.
    counts = VmPool.objects.with_counts().get(pk=pool.pk)
    free = VirtualMachine.objects.filter(pool=pool, owner__isnull=True).count()
    assert (counts.running_unassigned, counts.starting_vms) == (min(PRESTARTED, free), 0)
    vms = list(VirtualMachine.objects.select_related("host"))
    defined_on = defaultdict(list)
    for host in sim_hosts:
        for domain in driver.host_report(host.uri).domains:
            defined_on[domain.uuid].append(host.pk)
    assert {vm.name: defined_on[str(vm.uuid)] for vm in vms} == {
        vm.name: [vm.host_id] if vm.host_id else [] for vm in vms
    }
    reported = {
        vm.name: status_for(driver.domain_power_state(vm.host.uri, str(vm.uuid)))
        for vm in vms
        if vm.host_id
    }
    assert reported == {vm.name: vm.status for vm in vms if vm.host_id}

    assert [c.process.poll() for c in clusters] == [None, None]
    assert server.running()
