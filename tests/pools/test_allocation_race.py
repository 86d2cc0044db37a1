"""A VM handed out while its start job ends: the answer still names that job.

Allocation picks a VM being started, then fetches its start job to answer with. When the job
ends between the two (under load, a worker finishes it while the web process is between
statements), the answer said "not instant" with no job, so a client following the job had
nothing to follow. The job is now taken from the row that was picked.

To hold the allocation between the two statements, a second transaction holds the grant row
the allocation must insert (the same user, role and VM) until the job has ended.
"""

import threading

import pytest
from django.db import connection

from hosts import jobs
from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from pools import services
from tests.conftest import lock_waiters, wait_until
from tests.pools.fixtures import holding_grant_row, pool_vms


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("holding one transaction inside another's needs PostgreSQL's row locks")


def test_a_vm_whose_start_job_ends_while_it_is_handed_out_comes_with_that_job(
    postgres_only, pool_of, pool_user
):
    pool = pool_of(down=1)
    [vm] = pool_vms(pool)
    start = jobs.submit(JobKind.START, vm=vm)
    Job.objects.filter(pk=start.pk).update(state=JobState.RUNNING)
    VirtualMachine.objects.filter(pk=vm.pk).update(status=VmStatus.STARTING)
    user = pool_user(pool)
    outcome = {}

    def allocate() -> None:
        try:
            outcome["allocation"] = services.allocate_vm(pool, user)
        except Exception as exc:  # reported by the assertions below
            outcome["error"] = exc
        finally:
            connection.close()

    with holding_grant_row(user, vm, seconds=30):
        taker = threading.Thread(target=allocate)
        taker.start()
        wait_until(lock_waiters, timeout=10, message="the allocation never waited")

        # The start job ends while the allocation waits between picking the VM and answering
        # (the VM's row is the allocation's until it commits; the job's row is free).
        Job.objects.filter(pk=start.pk).update(state=JobState.SUCCEEDED)
    taker.join(30)

    assert "error" not in outcome, outcome.get("error")
    allocation = outcome["allocation"]
    assert (allocation.vm.pk, allocation.instant) == (vm.pk, False)
    assert allocation.job is not None and allocation.job.pk == start.pk
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id == user.pk
