"""A VM handed out while its pool shrinks or is deleted stays with its user.

Shrinking and deleting pick the pool's unassigned VMs and take them out. An allocation that
has just assigned one of them, and not committed yet, is invisible to them: they used to take
that VM too, so the user's new VM was detached from its pool and deleted under them. They now
lock the VMs they take, wait for the allocation holding one, and see whom it went to.

To hold the allocation open after it assigned the VM, a second transaction holds the grant row
the allocation must insert (the same user, role and VM) until the shrink or delete waits too.
"""

import threading

import pytest
from django.db import connection

from hosts.models import Job, VirtualMachine, VmStatus
from pools import services
from pools.models import VmPool
from tests.conftest import lock_waiters, wait_until
from tests.pools.fixtures import holding_grant_row, pool_vms


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("holding one transaction inside another's needs PostgreSQL's row locks")


def _in_thread(work, outcome: dict, key: str) -> threading.Thread:
    def run() -> None:
        try:
            outcome[key] = work()
        except Exception as exc:  # reported by the assertions below
            outcome[f"{key}-error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _while_allocation_is_open(pool, user, vm, request) -> dict:
    """Allocate a VM of ``pool`` to ``user`` (it will be ``vm``), and while that allocation has
    assigned the VM but not committed, start ``request``; then let both finish."""
    outcome: dict = {}
    with holding_grant_row(user, vm):
        taker = _in_thread(lambda: services.allocate_vm(pool, user), outcome, "allocation")
        wait_until(lambda: lock_waiters() >= 1, timeout=30, message="allocation never waited")
        requester = _in_thread(request, outcome, "response")
        wait_until(
            lambda: lock_waiters() >= 2 or not requester.is_alive(),
            timeout=30,
            message="the request neither waited nor ended",
        )
    taker.join(60)
    requester.join(60)
    assert "allocation-error" not in outcome, outcome["allocation-error"]
    assert "response-error" not in outcome, outcome["response-error"]
    assert outcome["allocation"].vm.pk == vm.pk
    return outcome


def test_shrinking_while_the_last_free_vm_is_handed_out_is_a_409_and_the_vm_stays(
    postgres_only, pool_of, pool_user, make_user, client_for, admin_user
):
    pool = pool_of(up=2)
    free, taken = pool_vms(pool)
    VirtualMachine.objects.filter(pk=taken.pk).update(owner=make_user())
    user = pool_user(pool)
    admin = client_for(admin_user)

    outcome = _while_allocation_is_open(
        pool,
        user,
        free,
        lambda: admin.patch(f"/api/vmpools/{pool.pk}/", {"size": 1}, format="json"),
    )

    response = outcome["response"]
    assert response.status_code == 409, response.content
    assert "Cannot shrink" in response.json()["detail"]
    free.refresh_from_db()
    assert (free.owner_id, free.pool_id, free.admin_hold) == (user.pk, pool.pk, False)
    assert not Job.objects.filter(vm=free).exists()
    pool.refresh_from_db()
    assert pool.size == 2


def test_shrinking_while_a_vm_is_handed_out_removes_the_others(
    postgres_only, pool_of, pool_user, client_for, admin_user
):
    pool = pool_of(up=3)
    first, second, third = pool_vms(pool)
    user = pool_user(pool)
    admin = client_for(admin_user)

    outcome = _while_allocation_is_open(
        pool,
        user,
        first,
        lambda: admin.patch(f"/api/vmpools/{pool.pk}/", {"size": 1}, format="json"),
    )

    assert outcome["response"].status_code == 200, outcome["response"].content
    assert [(vm.pk, vm.owner_id) for vm in pool_vms(pool)] == [(first.pk, user.pk)]
    assert set(Job.objects.values_list("vm_id", flat=True)) == {second.pk, third.pk}


def test_deleting_a_pool_while_a_vm_is_handed_out_is_a_409_and_the_vm_stays(
    postgres_only, pool_of, pool_user, client_for, admin_user
):
    pool = pool_of(up=1, down=1)
    up, down = pool_vms(pool)
    user = pool_user(pool)
    admin = client_for(admin_user)

    outcome = _while_allocation_is_open(
        pool, user, up, lambda: admin.delete(f"/api/vmpools/{pool.pk}/")
    )

    response = outcome["response"]
    assert response.status_code == 409, response.content
    assert up.name in response.json()["detail"]
    assert VmPool.objects.filter(pk=pool.pk).exists()
    up.refresh_from_db()
    assert (up.owner_id, up.pool_id, up.status) == (user.pk, pool.pk, VmStatus.UP)
    assert [vm.pk for vm in pool_vms(pool)] == [up.pk, down.pk]
    assert not Job.objects.exists()
