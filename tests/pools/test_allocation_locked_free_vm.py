"""A free VM whose row another writer holds (the sync writing its status) is still handed
out: allocation skips locked rows to pass concurrent allocations, but when that leaves it
nothing it waits for the locks instead of answering "no free VM", and then sees what the
writer did (PostgreSQL)."""

import threading
from collections.abc import Callable

import pytest
from django.db import connection
from rest_framework.test import APIClient

from hosts import jobs
from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from pools.monitor import PRESTART
from tests.conftest import holding, lock_waiters, wait_until
from tests.pools.fixtures import add_pool_vms


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("holding a row lock from another transaction needs PostgreSQL")


def _allocate_while_held(pool, user, write: Callable[[], None]) -> dict:
    """``user`` takes a VM of ``pool`` while another transaction has done ``write`` and is
    still open; that transaction commits once the allocation waits for its lock. The
    allocation's answer: {"status": ..., "body": ...}."""
    answer = {}

    def allocate() -> None:
        try:
            client = APIClient()
            client.force_authenticate(user)
            response = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")
            answer["status"], answer["body"] = response.status_code, response.json()
        finally:
            connection.close()

    with holding(write):
        taker = threading.Thread(target=allocate)
        taker.start()
        wait_until(lock_waiters, timeout=20, message="the allocation never waited for the row")
        assert "status" not in answer  # still waiting, not refused
    taker.join(30)
    return answer


def test_the_only_free_vm_locked_by_a_sync_write_is_waited_for_and_handed_out(
    postgres_only, pool_of, pool_user
):
    pool = pool_of()
    [vm] = add_pool_vms(pool, [VmStatus.UP])
    user = pool_user(pool)

    # What the sync does to a VM it reports on: a plain UPDATE of its row.
    answer = _allocate_while_held(
        pool, user, lambda: VirtualMachine.objects.filter(pk=vm.pk).update(status=VmStatus.UP)
    )

    assert answer["status"] == 200, answer["body"]
    assert (answer["body"]["vm"]["id"], answer["body"]["instant"]) == (vm.pk, True)
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id == user.pk


def test_a_pool_whose_only_vm_was_taken_while_waiting_for_it_answers_no_free_vm(
    postgres_only, pool_of, pool_user, make_user
):
    pool = pool_of()
    [vm] = add_pool_vms(pool, [VmStatus.UP])
    user = pool_user(pool)
    first = make_user()

    # Another allocation that has the VM locked and assigns it before committing.
    answer = _allocate_while_held(
        pool, user, lambda: VirtualMachine.objects.filter(pk=vm.pk).update(owner=first)
    )

    assert answer["status"] == 409, answer["body"]
    assert answer["body"]["detail"] == f"Pool {pool.name} has no free VM left; try again later."
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id == first.pk


def test_a_stopped_vm_whose_prestart_is_queued_while_waiting_is_handed_out_with_that_start(
    postgres_only, pool_of, pool_user
):
    pool = pool_of()
    [vm] = add_pool_vms(pool, [VmStatus.DOWN])
    user = pool_user(pool)
    queued = []

    # The prestart monitor queueing a start on the VM: it locks the VM's row, writes only the
    # job.
    answer = _allocate_while_held(
        pool,
        user,
        lambda: queued.extend(jobs.submit_many(JobKind.START, [vm], params={"reason": PRESTART})),
    )

    assert answer["status"] == 200, answer["body"]
    assert (answer["body"]["vm"]["id"], answer["body"]["instant"]) == (vm.pk, False)
    # The user follows the prestart; the VM is not started a second time.
    assert answer["body"]["job"]["id"] == queued[0].pk
    assert list(Job.objects.filter(vm=vm).values_list("kind", flat=True)) == [JobKind.START]
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id == user.pk
