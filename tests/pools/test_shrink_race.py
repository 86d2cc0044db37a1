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
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from guardian.models import UserObjectPermission

from hosts.models import Job, VirtualMachine, VmStatus
from pools import services
from pools.models import VmPool
from project.models import Role
from tests.conftest import wait_until
from tests.pools.conftest import pool_vms


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("holding one transaction inside another's needs PostgreSQL's row locks")


def _lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


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
    role = Role.objects.get(name="UserRole")
    permission = Permission.objects.get(
        content_type=ContentType.objects.get_for_model(VirtualMachine),
        codename=role.grant_codename,
    )
    holding, release = threading.Event(), threading.Event()
    outcome: dict = {}

    def hold_the_grant_row() -> None:
        try:
            with transaction.atomic():
                UserObjectPermission.objects.create(
                    user=user,
                    permission=permission,
                    content_type=permission.content_type,
                    object_pk=str(vm.pk),
                )
                holding.set()
                release.wait(60)
                transaction.set_rollback(True)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_grant_row)
    holder.start()
    try:
        assert holding.wait(20)
        taker = _in_thread(lambda: services.allocate_vm(pool, user), outcome, "allocation")
        wait_until(lambda: _lock_waiters() >= 1, timeout=30, message="allocation never waited")
        requester = _in_thread(request, outcome, "response")
        wait_until(
            lambda: _lock_waiters() >= 2 or not requester.is_alive(),
            timeout=30,
            message="the request neither waited nor ended",
        )
    finally:
        release.set()
        holder.join(30)
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
