"""The web server restarted in the middle of a burst of writes: stopped with SIGTERM and
started again, its workers killed with SIGKILL (the master starts new ones), then the master
and its workers killed with SIGKILL and started again.

No write is ever half applied: every write either fully happened or not at all. A pool exists
only with all its VMs (each with its prepare job); a lease only with its reservations, their
allocations, its three events and its owner's grant; a VM taken from a pool has its user's
grant and its start job, and no grant is left on a VM its user does not hold; a VM created
through the API has its creator's grant. Every answer a client received matches the database;
a request that got no answer may or may not have happened, but never in part.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.utils import timezone
from guardian.models import UserObjectPermission

from hosts.models import Job, JobKind, VirtualMachine
from leases.models import Allocation, Lease, LeaseEvent, Reservation
from pools.models import VmPool
from project.models import Event, Role
from tests.conftest import unique, wait_until
from tests.pools.fixtures import add_pool_vms
from tests.reliability.conftest import token_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
        reason="killing the web server mid-transaction relies on PostgreSQL rolling back a "
        "dropped session's work while others write at once; SQLite has a single writer",
    ),
]

User = get_user_model()
CLIENTS = 6
# Answers to wait for between two blows, so that each lands in the middle of the burst.
ANSWERS_BETWEEN = 25
POOL_SIZE = 40
NEW_POOL_SIZE = 6
MAX_USER_VMS = 3
WRITES = ("allocate", "lease", "pool", "vm", "grant")


class Site:
    """The running web server the clients write to; the URL changes across restarts."""

    def __init__(self, server):
        self.server = server

    @property
    def url(self) -> str:
        return self.server.url


class Outcome:
    """One write and what its client saw: an answer (status and body), or none (the
    exception that ended it)."""

    def __init__(self, kind: str, key: str, user_id: int):
        self.kind, self.key, self.user_id = kind, key, user_id
        self.status: int | None = None
        self.body: object = None
        self.lost: str = ""

    def __repr__(self) -> str:
        return f"{self.kind} {self.key} -> {self.status or self.lost} {self.body!r:.300}"


class Clients:
    """CLIENTS threads writing as fast as they are answered, each write unique by name."""

    def __init__(self, site: Site, world: dict):
        self.site = site
        self.world = world
        self.outcomes: list[Outcome] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self.run, args=(n,), name=f"writer-{n}", daemon=True)
            for n in range(CLIENTS)
        ]
        self.errors: list[BaseException] = []

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)

    def answered(self) -> int:
        with self.lock:
            return sum(o.status is not None for o in self.outcomes)

    def run(self, number: int) -> None:
        rng = random.Random(number)
        try:
            while not self.stopping.is_set():
                outcome, body, path = self.choose(rng)
                try:
                    response = requests.post(
                        f"{self.site.url}{path}",
                        json=body,
                        headers=self.world["headers"][outcome.user_id],
                        timeout=60,
                    )
                except requests.RequestException as exc:
                    outcome.lost = f"{type(exc).__name__}: {exc}"
                    time.sleep(0.1)
                else:
                    outcome.status = response.status_code
                    try:
                        outcome.body = response.json()
                    except ValueError:
                        outcome.body = response.text[:300]
                with self.lock:
                    self.outcomes.append(outcome)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def choose(self, rng: random.Random) -> tuple[Outcome, dict | None, str]:
        world = self.world
        kind = rng.choice(WRITES)
        if kind == "allocate":
            user = rng.choice(world["takers"])
            return Outcome(kind, "", user.pk), None, f"/api/vmpools/{world['pool'].pk}/allocatevm/"
        if kind == "lease":
            user = rng.choice(world["leasers"])
            name = unique("burst-lease")
            start = world["day"] + timedelta(hours=rng.randrange(0, 24 * 20))
            end = start + timedelta(hours=rng.randrange(1, 48))
            body = {
                "name": name,
                "start_date": start.isoformat(),
                "end_date": end.isoformat(),
                "reservations": [
                    {
                        "resource_type": "virtual:instance",
                        "vcpus": 2,
                        "memory_mb": 512,
                        "disk_gb": 1,
                        "amount": 2,
                        "affinity": False,
                    },
                    {
                        "resource_type": "virtual:instance",
                        "vcpus": 1,
                        "memory_mb": 256,
                        "disk_gb": 1,
                        "amount": 1,
                    },
                ],
            }
            return Outcome(kind, name, user.pk), body, "/api/leases/"
        if kind == "pool":
            name = unique("burst-pool")
            body = {
                "name": name,
                "cluster": world["cluster"].pk,
                "template": world["template"].pk,
                "size": NEW_POOL_SIZE,
                "prestarted_vms": 0,
                "name_pattern": f"{name}-?",
            }
            return Outcome(kind, name, world["admin"].pk), body, "/api/vmpools/"
        if kind == "vm":
            name = unique("burst-vm")
            body = {"name": name, "cluster": world["cluster"].pk, "template": world["template"].pk}
            return Outcome(kind, name, world["creator"].pk), body, "/api/vms/"
        grantee = rng.choice(world["grantees"])
        body = {
            "role": "UserRole",
            "user": grantee.username,
            "object_type": "pool",
            "object_id": world["pool"].pk,
        }
        return Outcome(kind, grantee.username, world["admin"].pk), body, "/api/permissions/"


def _workers_of(master_pid: int) -> list[int]:
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return [int(pid) for pid in children]


def _kill_workers(server) -> list[int]:
    """SIGKILL every gunicorn worker (not the master, which starts new ones)."""
    workers = _workers_of(server.process.pid)
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return workers


def _kill_all(server) -> None:
    """SIGKILL the master and its workers at once, as a crash of the machine's web tier."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()


def _grant_holders(role_name: str, model) -> set[tuple[int, int]]:
    """(user id, object id) of every grant of the role on objects of the model."""
    codename = Role.objects.get(name=role_name).grant_codename
    rows = UserObjectPermission.objects.filter(
        permission__codename=codename, content_type=ContentType.objects.get_for_model(model)
    ).values_list("user_id", "object_pk")
    return {(user_id, int(pk)) for user_id, pk in rows}


@pytest.fixture
def world(
    transactional_db,
    make_cluster,
    make_template,
    make_pool,
    make_user,
    grant,
    reservable_hosts,
):
    """Everything the writers need: a pool of stopped VMs and its takers, lease users and
    reservable hosts, an admin, a VM creator (PowerUser) and users to grant roles to."""
    cluster = make_cluster()
    template = make_template(cluster=cluster, vcpus=1, memory_mb=128, disk_gb=1)
    pool = make_pool(
        cluster=cluster,
        template=template,
        size=POOL_SIZE,
        prestarted_vms=0,
        max_user_vms=MAX_USER_VMS,
    )
    add_pool_vms(pool, ["down"] * POOL_SIZE)
    takers = [make_user(unique("taker")) for _ in range(8)]
    for user in takers:
        grant(user, "UserRole", pool)
    leasers = [make_user(unique("leaser")) for _ in range(4)]
    for user in leasers:
        grant(user, "LeaseUser")
    reservable_hosts(3)
    admin = make_user(unique("admin"), superuser=True)
    creator = make_user(unique("creator"))
    grant(creator, "PowerUser", cluster)
    grantees = [make_user(unique("grantee")) for _ in range(30)]
    everyone = [*takers, *leasers, admin, creator]
    return {
        "cluster": cluster,
        "template": template,
        "pool": pool,
        "takers": takers,
        "leasers": leasers,
        "admin": admin,
        "creator": creator,
        "grantees": grantees,
        "headers": {user.pk: token_for(user) for user in everyone},
        "day": (timezone.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0),
    }


def _check_no_half_writes(world, outcomes: list[Outcome]) -> None:
    """Every write in the database is whole; every answer matches the database."""
    pool = world["pool"]

    # Pools: each with all its VMs, each VM with its prepare job.
    made_pools = VmPool.objects.filter(name__startswith="burst-pool")
    for made in made_pools:
        vms = VirtualMachine.objects.filter(pool=made)
        prepares = Counter(
            Job.objects.filter(vm__pool=made, kind=JobKind.PREPARE).values_list("vm_id", flat=True)
        )
        assert vms.count() == NEW_POOL_SIZE, (made.name, vms.count())
        assert sorted(prepares.values()) == [1] * NEW_POOL_SIZE, (made.name, prepares)
    assert not VirtualMachine.objects.filter(name__startswith="burst-pool", pool=None).exists()

    # Leases: each with its two reservations, their allocations, its events and its grant.
    owners = _grant_holders("LeaseOwner", Lease)
    for lease in Lease.objects.filter(name__startswith="burst-lease"):
        reservations = list(Reservation.objects.filter(lease=lease).order_by("pk"))
        assert [r.amount for r in reservations] == [2, 1], lease.name
        for reservation in reservations:
            slots = Allocation.objects.filter(reservation=reservation).values_list(
                "host_id", "slots"
            )
            assert sum(s for _, s in slots) == reservation.amount, (lease.name, list(slots))
        spread = Allocation.objects.filter(reservation=reservations[0]).values("host_id")
        assert spread.distinct().count() == 2, lease.name  # affinity false: distinct hosts
        events = sorted(LeaseEvent.objects.filter(lease=lease).values_list("event_type", flat=True))
        assert events == ["before_end_lease", "end_lease", "start_lease"], lease.name
        assert (lease.owner_id, lease.pk) in owners, lease.name
        accepted = Event.objects.filter(lease_id=lease.pk, message=f"Lease {lease.name} accepted")
        assert accepted.count() == 1, lease.name

    # Allocations: a held VM has its user's grant and one start job; no grant without a VM.
    users_on_vms = _grant_holders("UserRole", VirtualMachine)
    held = dict(
        VirtualMachine.objects.filter(pool=pool, owner__isnull=False).values_list("pk", "owner_id")
    )
    pool_vms = set(VirtualMachine.objects.filter(pool=pool).values_list("pk", flat=True))
    assert {(u, vm) for u, vm in users_on_vms if vm in pool_vms} == {
        (owner, vm) for vm, owner in held.items()
    }
    starts = Counter(
        Job.objects.filter(vm__pool=pool, kind=JobKind.START).values_list("vm_id", flat=True)
    )
    assert starts == Counter(list(held)), (starts, held)
    given = Counter(
        Event.objects.filter(pool_id=pool.pk, message__contains=" given to ").values_list(
            "vm_id", flat=True
        )
    )
    assert given == Counter(list(held))
    per_user = Counter(held.values())
    assert max(per_user.values(), default=0) <= MAX_USER_VMS

    # VMs created through the API: each with its creator's grant.
    managers = _grant_holders("UserVmManager", VirtualMachine)
    created = VirtualMachine.objects.filter(name__startswith="burst-vm")
    assert {(vm.owner_id, vm.pk) for vm in created} <= managers
    assert {vm.owner_id for vm in created} <= {world["creator"].pk}

    # Every answer matches the database.
    granted = _grant_holders("UserRole", VmPool)
    usernames = dict(User.objects.values_list("username", "pk"))
    # Nothing is returned in the burst, so a refusal's reason still holds at the end.
    pool_name = pool.name
    no_free_vm = len(held) == POOL_SIZE
    grant_answers = Counter()
    for outcome in outcomes:
        if outcome.status is None:
            continue
        body = outcome.body
        if outcome.kind == "allocate" and outcome.status == 200:
            assert held.get(body["vm"]["id"]) == outcome.user_id, outcome
        elif outcome.kind == "allocate":
            # Refused for the reason that held when it was asked, and still holds.
            reasons = set()
            if no_free_vm:
                reasons.add(f"Pool {pool_name} has no free VM left; try again later.")
            if per_user[outcome.user_id] == MAX_USER_VMS:
                reasons.add(
                    f"You hold {MAX_USER_VMS} VM(s) of {pool_name}, its limit per user; "
                    "return one before taking another."
                )
            assert outcome.status == 409, outcome
            assert body["detail"] in reasons, outcome
        elif outcome.kind == "lease" and outcome.status == 201:
            found = Lease.objects.filter(name=outcome.key).values_list("pk", flat=True)
            assert list(found) == [body["id"]], outcome
        elif outcome.kind == "lease":
            assert outcome.status == 409, outcome
            assert body["detail"].startswith("The lease does not fit: "), outcome
            assert not Lease.objects.filter(name=outcome.key).exists(), outcome
        elif outcome.kind == "pool":
            assert outcome.status == 201, outcome
            found = VmPool.objects.filter(name=outcome.key).values_list("pk", flat=True)
            assert list(found) == [body["id"]], outcome
        elif outcome.kind == "vm":
            assert outcome.status == 201, outcome
            found = VirtualMachine.objects.filter(name=outcome.key).values_list("pk", flat=True)
            assert list(found) == [body["id"]], outcome
        elif outcome.status == 201:
            assert (usernames[outcome.key], pool.pk) in granted, outcome
            grant_answers[outcome.key] += 1
        else:
            # The grant was there already: answered with it, nothing made twice.
            assert outcome.status == 200, outcome
            assert (usernames[outcome.key], pool.pk) in granted, outcome
    # Each grant was made by one request (201); asking again found it (200).
    assert all(created == 1 for created in grant_answers.values()), grant_answers


def test_restarting_and_killing_the_web_server_mid_burst_never_half_applies_a_write(
    world, web_server
):
    server = web_server()
    clients = Clients(Site(server), world)
    clients.start()

    def let_writes_flow() -> None:
        target = clients.answered() + ANSWERS_BETWEEN
        wait_until(
            lambda: clients.answered() >= target,
            timeout=120,
            message=lambda: f"writes stalled: {clients.outcomes[-5:]}\n{server.log()[-3000:]}",
        )

    let_writes_flow()
    server.stop()  # SIGTERM: the workers finish the requests they hold
    server.start()
    let_writes_flow()
    assert _kill_workers(server)
    let_writes_flow()
    _kill_all(server)
    server.start()
    let_writes_flow()
    clients.stop()

    assert clients.errors == []
    outcomes = clients.outcomes
    assert [o for o in outcomes if o.status is not None and o.status >= 500] == []
    # Sent and then cut off (not refused for want of a server): the blows hit writes in flight.
    cut = [o for o in outcomes if "Connection aborted" in o.lost]
    done = Counter(o.kind for o in outcomes if o.status in (200, 201))
    assert set(done) == set(WRITES), done
    assert cut, "no request was in flight when the server was killed"
    _check_no_half_writes(world, outcomes)


def _backend_waiting_on(table: str) -> int | None:
    """The PostgreSQL backend of another session waiting for a lock in a statement on
    ``table``, if any."""
    with connection.cursor() as cursor:
        # Within a transaction PostgreSQL keeps showing the activity it saw first.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query ILIKE %s AND pid <> pg_backend_pid()",
            [f"%{table}%"],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _backend_gone(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is None


def test_a_vm_creation_killed_between_its_writes_leaves_no_vm_without_its_grant(world, web_server):
    """The web server dies after the VM row is written and before its creator's grant is:
    the VM must not survive alone (its creator could neither see nor delete it)."""
    server = web_server()
    creator, cluster = world["creator"], world["cluster"]
    name = unique("cut-vm")
    permission = Permission.objects.get(
        codename=Role.objects.get(name="UserVmManager").grant_codename,
        content_type=ContentType.objects.get_for_model(VirtualMachine),
    )
    answers: list = []

    def create() -> None:
        try:
            answers.append(
                requests.post(
                    f"{server.url}/api/vms/",
                    json={"name": name, "cluster": cluster.pk, "template": world["template"].pk},
                    headers=world["headers"][creator.pk],
                    timeout=60,
                )
            )
        except requests.RequestException as exc:
            answers.append(exc)

    with transaction.atomic():
        # The creator's grant on the next VMs, written and not committed: the server's own
        # insert of that grant waits for this transaction, after the VM row is written.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT last_value FROM "
                "pg_sequences WHERE sequencename = "
                "split_part(pg_get_serial_sequence('hosts_virtualmachine', 'id'), '.', 2)"
            )
            last = cursor.fetchone()[0]
        UserObjectPermission.objects.bulk_create(
            UserObjectPermission(
                user=creator,
                permission=permission,
                content_type=permission.content_type,
                object_pk=str(last + n),
            )
            for n in range(1, 6)
        )
        writer = threading.Thread(target=create, daemon=True)
        writer.start()
        waiting = wait_until(
            lambda: _backend_waiting_on("guardian_userobjectpermission"),
            timeout=60,
            message=lambda: f"the server never reached the grant: {answers} {server.log()[-3000:]}",
        )
        _kill_all(server)
        transaction.set_rollback(True)
    wait_until(lambda: _backend_gone(waiting), timeout=60, message="the killed session lingers")
    writer.join(60)

    assert len(answers) == 1 and isinstance(answers[0], requests.RequestException), answers
    vms = list(VirtualMachine.objects.filter(name=name).values_list("pk", "owner_id"))
    managers = _grant_holders("UserVmManager", VirtualMachine)
    assert [vm for vm in vms if (creator.pk, vm[0]) not in managers] == []

    # Started again, the server creates that VM whole.
    server.start()
    response = requests.post(
        f"{server.url}/api/vms/",
        json={"name": name, "cluster": cluster.pk, "template": world["template"].pk},
        headers=world["headers"][creator.pk],
        timeout=60,
    )
    assert response.status_code == 201, response.text
    created = response.json()["id"]
    assert (creator.pk, created) in _grant_holders("UserVmManager", VirtualMachine)
    seen = requests.get(
        f"{server.url}/api/vms/{created}/", headers=world["headers"][creator.pk], timeout=60
    )
    assert seen.status_code == 200
