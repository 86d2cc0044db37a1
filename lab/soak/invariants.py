"""The soak's invariants on the database and the hosts: some checked all along (``Watcher``),
the rest once the faults have stopped and the fleet has had time to settle (``settled``).
Each broken invariant is a violation with the history that leads to it."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from django.db.models import Count, F, Q

from hosts import driver
from hosts.models import (
    ExternalDomain,
    Host,
    Job,
    JobJournal,
    JobKind,
    JobState,
    VirtualMachine,
    VmStatus,
)
from hosts.models.jobs import ACTIVE_JOB_STATES, RUNNING_JOB_STATES
from hosts.sync.report import test_drivers_own_domain
from lab.hostview import disagreements
from lab.soak.faults import db
from leases.models import Reservation
from pools.models import VmPool
from project.models import Event

WATCH_EVERY_S = 3
REPORT_TIMEOUT_S = 8
# Once faults stop: every job must have ended within this, and the rest must hold.
SETTLE_S = 240


def host_domains(hosts, pool: ThreadPoolExecutor) -> dict[int, dict[str, str]]:
    """Host id -> {uuid: power state} for each host that answers within REPORT_TIMEOUT_S (a
    frozen or dead host is left out)."""
    futures = {host.pk: pool.submit(driver.host_report, host.uri) for host in hosts}
    found = {}
    for host_id, future in futures.items():
        try:
            report = future.result(timeout=REPORT_TIMEOUT_S)
        except (driver.DriverError, FutureTimeout):
            continue
        found[host_id] = {d.uuid: d.power_state for d in report.domains}
    return found


class Watcher(threading.Thread):
    """Checks, every few seconds while the soak runs:
    - no VM of Corral's runs on two hosts (seen in two samples in a row, with no migration of
      it under way: a live migration's last moment runs it on both);
    - no VM has two jobs running at once;
    - no reservation has more VMs running than it reserved."""

    def __init__(self, record, stop: threading.Event):
        super().__init__(name="soak-watcher", daemon=True)
        self.record = record
        self.stop_event = stop
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="soak-report")
        self.twice: set[str] = set()
        self.reported: set[tuple[str, str]] = set()
        self.samples = 0

    def run(self) -> None:
        while not self.stop_event.wait(WATCH_EVERY_S):
            db(self.sample)

    def _violation(self, invariant: str, key: str, what: str, vm_id: int | None = None) -> None:
        if (invariant, key) in self.reported:
            return
        self.reported.add((invariant, key))
        history = self.record.history(vm_id) if vm_id else []
        if vm_id:
            history += [
                f"job {j.pk} {j.kind} {j.state} {j.worker} {j.error_code} {j.error_message[:80]}"
                for j in Job.objects.filter(vm_id=vm_id).order_by("pk")
            ]
        self.record.violation(invariant, what, history)

    def sample(self) -> None:
        self.samples += 1
        hosts = list(Host.objects.order_by("pk"))
        ours = {str(u) for u in VirtualMachine.objects.values_list("uuid", flat=True)}
        running = defaultdict(list)
        for host_id, domains in host_domains(hosts, self.pool).items():
            for uuid, state in domains.items():
                if state == "running" and uuid in ours:
                    running[uuid].append(host_id)
        doubled = {uuid for uuid, where in running.items() if len(where) > 1}
        # A live migration runs the guest on both hosts for its last moment, by design.
        migrating = {
            str(u)
            for u in Job.objects.filter(
                kind=JobKind.MIGRATE, state__in=ACTIVE_JOB_STATES, vm__uuid__in=doubled
            ).values_list("vm__uuid", flat=True)
        }
        doubled -= migrating
        for uuid in doubled & self.twice:
            vm = VirtualMachine.objects.filter(uuid=uuid).first()
            self._violation(
                "one host per VM",
                uuid,
                f"VM {vm.name if vm else uuid} runs on hosts {running[uuid]}",
                vm.pk if vm else None,
            )
        self.twice = doubled
        for row in (
            Job.objects.filter(state__in=RUNNING_JOB_STATES)
            .values("vm_id")
            .annotate(n=Count("pk"))
            .filter(n__gt=1)
        ):
            self._violation(
                "one job at a time",
                str(row["vm_id"]),
                f"VM {row['vm_id']} has {row['n']} jobs running at once",
                row["vm_id"],
            )
        over = (
            Reservation.objects.annotate(
                running=Count("vms", filter=~Q(vms__status=VmStatus.DOWN), distinct=True)
            )
            .filter(running__gt=F("amount"))
            .values("pk", "lease_id", "amount", "running")
        )
        for row in over:
            self._violation(
                "reserved capacity",
                str(row["pk"]),
                f"reservation {row['pk']} of lease {row['lease_id']} reserved {row['amount']} "
                f"instance(s) and has {row['running']} VMs running",
            )


def settled(record, readers, seconds: float = SETTLE_S) -> dict[str, float]:
    """Once faults have stopped: wait for the fleet to settle, then check what must hold.
    Returns how long each part took to hold (seconds)."""
    took = {}
    began = time.monotonic()

    def until(name: str, broken, timeout: float) -> list[str]:
        """Wait until ``broken()`` lists nothing (or the time is up); what it lists last."""
        deadline = began + timeout
        while True:
            wrong = db(broken, ["the database cannot be reached"])
            if not wrong:
                took[name] = round(time.monotonic() - began, 1)
                return []
            if time.monotonic() > deadline:
                return wrong
            time.sleep(1)

    # Every job ends, with a reason when it did not succeed.
    wrong = until("every job ended", _active_jobs, seconds)
    for line in wrong:
        record.violation("every job ends", line)
    for job in Job.objects.filter(
        Q(state=JobState.FAILED) & (Q(error_code="") | Q(error_message=""))
    ):
        record.violation("every job ends", f"job {job.pk} ({job.kind}) failed with no reason")
    # No job started its VM twice: a start defines the VM on each host it tries, once.
    for row in (
        JobJournal.objects.filter(message__startswith="Defining the VM on ")
        .values("job_id", "job__vm_id", "message")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
    ):
        record.violation(
            "one start per job",
            f"job {row['job_id']} of VM {row['job__vm_id']}: {row['message']!r} {row['n']} times",
            record.history(row["job__vm_id"]),
        )
    # The database agrees with every host about every VM.
    wrong = until("database agrees with the hosts", _disagreements, seconds)
    for line in wrong:
        record.violation("database agrees with the hosts", line)
    # The pools are back at their prestarted level.
    wrong = until("pools prestarted", pools_short, seconds)
    for line in wrong:
        record.violation("pools prestarted", line)
    # Nothing on a host that Corral does not know of.
    for line in db(_unknown_domains, ["the database cannot be reached"]):
        record.violation("no unknown domains", line)
    # A reader resuming the event feed with its last token missed nothing.
    for reader in readers:
        for line in db(lambda r=reader: _missed(r), ["the database cannot be reached"]):
            record.violation("event feed resumes", line)
    return took


def _active_jobs() -> list[str]:
    return [
        f"job {j.pk} {j.kind} still {j.state} (vm {j.vm_id}, step {j.step!r}, worker {j.worker})"
        for j in Job.objects.filter(state__in=ACTIVE_JOB_STATES).order_by("pk")
    ]


def _disagreements() -> list[str]:
    return disagreements(VirtualMachine.objects.all(), Host.objects.order_by("pk"))


def pools_short() -> list[str]:
    wrong = []
    for pool in VmPool.objects.with_counts():
        free = pool.total_vms - pool.assigned_vms - pool.held_vms
        wanted = min(pool.prestarted_vms, free)
        # Lowering the level shuts no VM down (the admin is told so): at least, not exactly.
        if pool.prestarted_now < wanted:
            wrong.append(
                f"pool {pool.name}: {pool.prestarted_now} prestarted, {wanted} wanted "
                f"({pool.total_vms} VMs, {pool.assigned_vms} taken)"
            )
    return wrong


def _unknown_domains() -> list[str]:
    known = {str(u) for u in VirtualMachine.objects.values_list("uuid", flat=True)}
    external = defaultdict(set)
    for host_id, uuid in ExternalDomain.objects.values_list("host_id", "uuid"):
        external[host_id].add(str(uuid))
    hosts = list(Host.objects.order_by("pk"))
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = host_domains(hosts, pool)
    names = {host.pk: host.name for host in hosts}
    # libvirt's test driver's own domain, which the sync does not list (hosts.sync.report).
    own = {host.pk: test_drivers_own_domain(host.uri) for host in hosts}
    wrong = [f"{names[h]} did not answer" for h in names if h not in found]
    for host_id, domains in found.items():
        for uuid in domains:
            if uuid == own.get(host_id):
                continue
            if uuid not in known and uuid not in external[host_id]:
                wrong.append(f"{names[host_id]} has domain {uuid}, unknown to Corral")
    return wrong


def _missed(reader) -> list[str]:
    if reader.first_token is None:
        return [f"{reader.client.name} never read the feed"]
    ids = set(
        Event.objects.filter(id__gt=reader.first_token, id__lte=reader.token).values_list(
            "id", flat=True
        )
    )
    missed = ids - reader.seen
    for since, token in reader.resyncs:
        missed = {i for i in missed if not since < i <= token}
    if not missed:
        return []
    return [
        f"{reader.client.name} ({'resuming' if reader.drops else 'following'}) missed "
        f"{len(missed)} of {len(ids)} events between tokens {reader.first_token} and "
        f"{reader.token}, e.g. {sorted(missed)[:10]}"
    ]
