"""A host sync and a job finishing one of that host's VMs at the same moment both complete
(PostgreSQL: the sync's host lock must not block the job's foreign-key check on the host)."""

import threading

import pytest
from django.conf import settings
from django.db import connection, transaction

from hosts import driver, sync
from hosts.models import VirtualMachine
from tests.conftest import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
        reason="row locks and foreign-key checks at commit are PostgreSQL's; SQLite has one "
        "writer at a time",
    ),
]


class Outcome(threading.Thread):
    """Runs ``body`` on its own thread and database connection; keeps what it raised."""

    def __init__(self, body):
        super().__init__(daemon=True)
        self.body = body
        self.error: Exception | None = None
        self.backend_pid: int | None = None

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.backend_pid = cursor.fetchone()[0]
            self.body()
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()


def _waits_for_a_lock(pid: int | None) -> bool:
    if pid is None:
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


def test_a_sync_writing_a_vm_a_job_holds_waits_for_the_job_instead_of_deadlocking(
    transactional_db, running_vm
):
    vm = running_vm()
    host = vm.host
    # As before a VM's first report from its host: the host has not been recorded as its
    # power host yet, so pointing the VM at it checks the host row when the job commits.
    VirtualMachine.objects.filter(pk=vm.pk).update(power_host=None, power_state="")
    report = driver.host_report(host.uri)
    job_holds_vm = threading.Event()
    sync_waits = threading.Event()

    def job_reconciles_vm():
        # What finish_vm() does at the end of a job: lock the VM, record its host, commit.
        with transaction.atomic():
            VirtualMachine.objects.select_for_update(of=("self",)).get(pk=vm.pk)
            VirtualMachine.objects.filter(pk=vm.pk).update(power_host=host, power_state="running")
            job_holds_vm.set()
            sync_waits.wait(30)

    job = Outcome(job_reconciles_vm)
    job.start()
    assert job_holds_vm.wait(30)
    syncing = Outcome(lambda: sync.apply_report(host.pk, report))
    syncing.start()
    wait_until(
        lambda: _waits_for_a_lock(syncing.backend_pid),
        timeout=60,
        message="the sync never waited for the VM row the job holds",
    )
    sync_waits.set()
    job.join(60)
    syncing.join(60)

    assert (job.is_alive(), syncing.is_alive()) == (False, False)
    assert (job.error, syncing.error) == (None, None)
    vm.refresh_from_db()
    assert (vm.power_host_id, vm.power_state, vm.status) == (host.pk, "running", "up")
