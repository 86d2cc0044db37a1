"""Pool VMs held for the admins (oVirt's "running not by the admin"): a pool VM someone other
than its user starts is held, never handed to a user and not counted as prestarted, until
someone who may change it releases it (``PATCH /api/vms/{id}/ {"admin_hold": false}``)."""

from __future__ import annotations

import pytest

from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from pools import monitor, services
from pools.models import VmPool
from project.models import Event, EventKind
from tests.conftest import stored_rows, wait_until
from tests.pools.fixtures import pool_vms, prestart_jobs


@pytest.fixture
def pool_admin(make_user, grant):
    """pool_admin(pool) -> a user holding PoolAdmin on the pool."""

    def make(pool: VmPool):
        user = make_user()
        grant(user, "PoolAdmin", pool)
        return user

    return make


def _held(vm) -> bool:
    return VirtualMachine.objects.get(pk=vm.pk).admin_hold


# -- who sets the hold ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_pool_admin_starting_an_unassigned_vm_holds_it_for_the_admins(
    pool_of, pool_admin, client_for
):
    pool = pool_of(down=2)
    vm = pool_vms(pool)[0]
    admin = pool_admin(pool)

    response = client_for(admin).post(f"/api/vms/{vm.pk}/start/")
    shown = client_for(admin).get(f"/api/vms/{vm.pk}/").json()

    assert response.status_code == 202
    assert shown["admin_hold"] is True
    said = Event.objects.filter(kind=EventKind.CHANGED, object_type="vm", object_id=vm.pk)
    assert said.filter(
        message=f"VM {vm.name} is held for the admins by {admin.username} "
        "(started by them, not by its pool); its pool hands it to nobody"
    ).exists()


@pytest.mark.django_db
def test_an_admin_starting_a_vm_a_user_holds_holds_it_too(
    pool_of, pool_admin, make_user, client_for
):
    pool = pool_of(down=1)
    vm = pool_vms(pool)[0]
    VirtualMachine.objects.filter(pk=vm.pk).update(owner=make_user())

    response = client_for(pool_admin(pool)).post(f"/api/vms/{vm.pk}/start/")

    assert response.status_code == 202
    assert _held(vm)


@pytest.mark.django_db
def test_the_vms_own_user_starting_it_does_not_hold_it(pool_of, pool_user, client_for):
    pool = pool_of(down=1, type="manual")
    user = pool_user(pool)
    taken = services.allocate_vm(pool, user)
    Job.objects.filter(pk=taken.job.pk).update(state=JobState.FAILED)  # it did not start

    response = client_for(user).post(f"/api/vms/{taken.vm.pk}/start/")

    assert response.status_code == 202
    assert not _held(taken.vm)


@pytest.mark.django_db
def test_the_start_an_allocation_queues_and_the_monitors_starts_hold_nothing(pool_of, pool_user):
    pool = pool_of(down=3, prestarted_vms=1)
    monitor.run_for_pool(pool.pk)
    taken = services.allocate_vm(pool, pool_user(pool))

    assert taken.job is not None and taken.job.kind == JobKind.START
    assert prestart_jobs(pool).count() == 1
    assert not VirtualMachine.objects.filter(pool=pool, admin_hold=True).exists()


@pytest.mark.django_db
def test_starting_a_vm_in_no_pool_holds_nothing(make_vm, make_user, grant, client_for):
    vm = make_vm()
    user = make_user()
    grant(user, "UserVmManager", vm)

    assert client_for(user).post(f"/api/vms/{vm.pk}/start/").status_code == 202
    assert not _held(vm)


# -- what the hold does ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_held_vm_is_neither_handed_out_nor_counted_and_a_release_makes_it_both(
    pool_of, pool_admin, pool_user, client_for
):
    pool = pool_of(up=1, down=1, prestarted_vms=1)
    held, down = pool_vms(pool)
    VirtualMachine.objects.filter(pk=held.pk).update(admin_hold=True)
    admin = client_for(pool_admin(pool))

    assert monitor.run_for_pool(pool.pk) == 1  # the held one does not count
    first = client_for(pool_user(pool)).post(f"/api/vmpools/{pool.pk}/allocatevm/")
    released = admin.patch(f"/api/vms/{held.pk}/", {"admin_hold": False}, format="json")
    second = client_for(pool_user(pool)).post(f"/api/vmpools/{pool.pk}/allocatevm/")

    assert first.status_code == 200 and first.json()["vm"]["id"] == down.pk
    assert released.status_code == 200 and released.json()["admin_hold"] is False
    assert second.status_code == 200
    assert (second.json()["vm"]["id"], second.json()["instant"]) == (held.pk, True)


@pytest.mark.django_db
def test_a_released_vm_counts_again_and_the_monitor_starts_nothing_more(
    pool_of, pool_admin, client_for
):
    pool = pool_of(up=1, down=2, prestarted_vms=1)
    held = pool_vms(pool)[0]
    VirtualMachine.objects.filter(pk=held.pk).update(admin_hold=True)

    response = client_for(pool_admin(pool)).patch(
        f"/api/vms/{held.pk}/", {"admin_hold": False}, format="json"
    )

    assert response.status_code == 200
    assert monitor.run_for_pool(pool.pk) == 0
    assert VmPool.objects.with_counts().get(pk=pool.pk).prestarted_now == 1


# -- who may change it ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_someone_who_may_only_use_the_vm_may_not_release_it(pool_of, make_user, grant, client_for):
    pool = pool_of(up=1)
    vm = pool_vms(pool)[0]
    VirtualMachine.objects.filter(pk=vm.pk).update(admin_hold=True)
    user = make_user()
    grant(user, "UserRole", vm)
    before = stored_rows()

    response = client_for(user).patch(f"/api/vms/{vm.pk}/", {"admin_hold": False}, format="json")

    assert response.status_code == 403
    assert response.json() == {"detail": "You may not change this virtual machine."}
    assert stored_rows() == before


@pytest.mark.django_db
def test_a_vm_in_no_pool_cannot_be_held(make_vm, admin_user, client_for):
    vm = make_vm(name="loner")
    before = stored_rows()

    response = client_for(admin_user).patch(
        f"/api/vms/{vm.pk}/", {"admin_hold": True}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "admin_hold": ["VM loner is in no pool; only a pool's VMs are held for the admins."]
    }
    assert stored_rows() == before


@pytest.mark.django_db
def test_holding_and_releasing_are_said_in_the_event_feed(pool_of, pool_admin, client_for):
    pool = pool_of(up=1)
    vm = pool_vms(pool)[0]
    admin = pool_admin(pool)
    client = client_for(admin)

    client.patch(f"/api/vms/{vm.pk}/", {"admin_hold": True}, format="json")
    client.patch(f"/api/vms/{vm.pk}/", {"admin_hold": False}, format="json")

    said = list(
        Event.objects.filter(object_type="vm", object_id=vm.pk, data__has_key="admin_hold")
        .order_by("pk")
        .values_list("message", "data", "pool_id")
    )
    assert said == [
        (
            f"VM {vm.name} is held for the admins by {admin.username}; its pool hands it to nobody",
            {"admin_hold": True},
            pool.pk,
        ),
        (
            f"VM {vm.name} was released by {admin.username}; its pool may hand it out again",
            {"admin_hold": False},
            pool.pk,
        ),
    ]


# -- with a real task cluster and simulated hosts ---------------------------------------------


@pytest.mark.slow
def test_a_vm_an_admin_starts_runs_held_and_users_get_others_until_it_is_released(
    real_pool, pool_admin, pool_user, client_for, task_cluster
):
    pool = real_pool(size=3, prestarted_vms=1, stateless=False)
    workers = task_cluster(VMPOOL_MONITOR_INTERVAL="1")

    def settled() -> bool:
        vms = pool_vms(pool)
        busy = Job.objects.filter(vm__pool=pool, state__in=["pending", "running"]).exists()
        return not busy and [vm.status for vm in vms].count(VmStatus.UP) == 1

    wait_until(settled, timeout=90, message=lambda: workers.log()[-3000:])
    prestarted = next(vm for vm in pool_vms(pool) if vm.status == VmStatus.UP)
    admins_vm = next(vm for vm in pool_vms(pool) if vm.status == VmStatus.DOWN)
    admin = client_for(pool_admin(pool))

    assert admin.post(f"/api/vms/{admins_vm.pk}/start/").status_code == 202
    wait_until(lambda: VirtualMachine.objects.get(pk=admins_vm.pk).status == VmStatus.UP, 60)
    first = client_for(pool_user(pool)).post(f"/api/vmpools/{pool.pk}/allocatevm/").json()
    # The monitor replaces the prestarted VM just taken, not counting the held one.
    wait_until(
        lambda: prestart_jobs(pool).filter(state=JobState.SUCCEEDED).count() == 2,
        timeout=60,
        message=lambda: workers.log()[-3000:],
    )
    second = client_for(pool_user(pool)).post(f"/api/vmpools/{pool.pk}/allocatevm/").json()
    third = client_for(pool_user(pool)).post(f"/api/vmpools/{pool.pk}/allocatevm/")
    released = admin.patch(f"/api/vms/{admins_vm.pk}/", {"admin_hold": False}, format="json")
    fourth = client_for(pool_user(pool)).post(f"/api/vmpools/{pool.pk}/allocatevm/").json()

    assert (first["vm"]["id"], first["instant"]) == (prestarted.pk, True)
    assert second["vm"]["id"] not in (prestarted.pk, admins_vm.pk)
    assert second["instant"] is True
    assert third.status_code == 409
    assert third.json()["detail"] == f"Pool {pool.name} has no free VM left; try again later."
    assert released.status_code == 200
    assert (fourth["vm"]["id"], fourth["instant"]) == (admins_vm.pk, True)
