"""Taking a VM from a pool: which VM, the limits, the grant it comes with, the monitor nudge."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hosts import jobs
from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from pools.tasks import run_monitor_on_nudge
from tests.pools.fixtures import add_pool_vms, pool_vms, queued_tasks, run_queued_tasks

pytestmark = pytest.mark.django_db


def _allocate(client, pool):
    return client.post(f"/api/vmpools/{pool.pk}/allocatevm/")


@pytest.fixture
def taker(pool_user, client_for):
    """taker(pool) -> (user, client) of a user who may take VMs from the pool."""

    def make(pool):
        user = pool_user(pool)
        return user, client_for(user)

    return make


# -- which VM ----------------------------------------------------------------------------------


def test_an_up_unassigned_vm_is_handed_out_first_instantly_without_a_job(pool_of, taker):
    pool = pool_of(down=2)
    [up] = add_pool_vms(pool, [VmStatus.UP])
    user, client = taker(pool)

    response = _allocate(client, pool)

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["vm"]["id"], body["instant"], body["job"]) == (up.pk, True, None)
    assert body["vm"]["owner"] == user.username
    assert not Job.objects.exists()


def test_without_an_up_vm_the_one_being_started_is_handed_out_with_its_job(pool_of, taker):
    pool = pool_of(down=3)
    first, starting, last = pool_vms(pool)
    start = jobs.submit(JobKind.START, vm=starting)
    user, client = taker(pool)

    response = _allocate(client, pool)

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["vm"]["id"], body["instant"]) == (starting.pk, False)
    assert (body["job"]["id"], body["job"]["kind"]) == (start.pk, "start")
    assert Job.objects.count() == 1


def test_without_up_or_starting_vms_a_down_vm_is_started_for_the_user(pool_of, taker):
    pool = pool_of(down=2)
    user, client = taker(pool)

    response = _allocate(client, pool)

    assert response.status_code == 200, response.json()
    body = response.json()
    first = pool_vms(pool)[0]
    assert (body["vm"]["id"], body["instant"]) == (first.pk, False)
    job = Job.objects.get()
    assert (body["job"]["id"], job.kind, job.state, job.vm_id) == (
        job.pk,
        JobKind.START,
        JobState.PENDING,
        first.pk,
    )
    assert job.requested_by == user
    assert "host" not in job.params  # the scheduler places it when the job runs


def test_an_up_vm_busy_with_another_job_is_not_handed_out_as_instant(pool_of, taker):
    pool = pool_of(up=1, down=1)
    busy, down = pool_vms(pool)
    jobs.submit(JobKind.SUSPEND, vm=busy)
    user, client = taker(pool)

    body = _allocate(client, pool).json()

    assert (body["vm"]["id"], body["instant"], body["job"]["kind"]) == (down.pk, False, "start")


def test_vms_an_admin_holds_are_never_handed_out(pool_of, taker):
    pool = pool_of(up=1, down=1)
    VirtualMachine.objects.filter(pool=pool).update(admin_hold=True)
    user, client = taker(pool)

    response = _allocate(client, pool)

    assert response.status_code == 409
    assert "no free VM" in response.json()["detail"]
    assert not VirtualMachine.objects.filter(owner__isnull=False).exists()


def test_an_admin_held_up_vm_is_passed_over_for_a_down_one(pool_of, taker):
    pool = pool_of(up=1, down=1)
    held, down = pool_vms(pool)
    VirtualMachine.objects.filter(pk=held.pk).update(admin_hold=True)
    user, client = taker(pool)

    body = _allocate(client, pool).json()

    assert (body["vm"]["id"], body["instant"]) == (down.pk, False)


# -- limits ------------------------------------------------------------------------------------


def test_a_user_at_max_user_vms_is_refused_with_a_409_that_says_so(pool_of, taker):
    pool = pool_of(up=3, max_user_vms=2)
    user, client = taker(pool)
    assert _allocate(client, pool).status_code == 200
    assert _allocate(client, pool).status_code == 200

    response = _allocate(client, pool)

    assert response.status_code == 409
    assert "You hold 2 VM(s)" in response.json()["detail"]
    assert "limit per user" in response.json()["detail"]
    assert VirtualMachine.objects.filter(owner=user).count() == 2


def test_vms_held_in_another_pool_do_not_count_towards_the_limit(pool_of, taker, grant):
    pool, other = pool_of(up=1), pool_of(up=1)
    user, client = taker(pool)
    grant(user, "UserRole", other)
    assert _allocate(client, other).status_code == 200

    response = _allocate(client, pool)

    assert response.status_code == 200, response.json()


def test_an_exhausted_pool_answers_409_no_free_vm(pool_of, taker, make_user):
    pool = pool_of(up=1, down=1)
    VirtualMachine.objects.filter(pool=pool).update(owner=make_user())
    user, client = taker(pool)

    response = _allocate(client, pool)

    assert response.status_code == 409
    assert response.json()["detail"] == f"Pool {pool.name} has no free VM left; try again later."


# -- what the user gets ------------------------------------------------------------------------


def test_the_allocated_vm_comes_with_a_user_role_grant_on_it(pool_of, taker):
    pool = pool_of(up=1)
    user, client = taker(pool)

    vm_id = _allocate(client, pool).json()["vm"]["id"]

    grants = client.get("/api/me/").json()["grants"]
    assert {"role": "UserRole", "object_type": "vm", "object_id": vm_id} in [
        {key: g[key] for key in ("role", "object_type", "object_id")} for g in grants
    ]


def test_the_user_sees_the_allocated_vm_in_the_vm_list(pool_of, taker):
    pool = pool_of(up=1)
    user, client = taker(pool)

    vm_id = _allocate(client, pool).json()["vm"]["id"]

    listed = client.get("/api/vms/", {"limit": 100}).json()["results"]
    assert [(vm["id"], vm["owner"]) for vm in listed if vm["id"] == vm_id] == [
        (vm_id, user.username)
    ]


def test_the_user_may_shut_the_allocated_vm_down(pool_of, taker):
    pool = pool_of(up=1)
    user, client = taker(pool)
    vm_id = _allocate(client, pool).json()["vm"]["id"]

    response = client.post(f"/api/vms/{vm_id}/shutdown/")

    assert response.status_code == 202, response.json()
    assert Job.objects.get(vm_id=vm_id).kind == JobKind.SHUTDOWN


def test_an_allocation_nudges_the_prestart_monitor_of_the_pool(
    pool_of, taker, django_capture_on_commit_callbacks
):
    pool = pool_of(up=1, down=1, prestarted_vms=1)
    user, client = taker(pool)

    with django_capture_on_commit_callbacks(execute=True):
        assert _allocate(client, pool).status_code == 200

    nudges = queued_tasks(run_monitor_on_nudge)
    assert [task.args() for task in nudges] == [(pool.pk,)]


def test_a_refused_allocation_nudges_nothing(pool_of, taker, django_capture_on_commit_callbacks):
    pool = pool_of()
    user, client = taker(pool)

    with django_capture_on_commit_callbacks(execute=True):
        assert _allocate(client, pool).status_code == 409

    assert queued_tasks(run_monitor_on_nudge) == []


# -- cost --------------------------------------------------------------------------------------


@pytest.mark.parametrize("free", ["up", "down"])
def test_one_allocation_takes_the_same_queries_from_10_vms_as_from_1000(
    free, pool_of, taker, make_user, django_assert_max_num_queries
):
    small, large = pool_of(down=9), pool_of(down=999)
    for pool in (small, large):
        add_pool_vms(pool, [free])
        others = VirtualMachine.objects.filter(pool=pool).exclude(status=free)
        others.update(owner=make_user())  # taken: only the one free VM is left
    _, small_client = taker(small)
    _, large_client = taker(large)
    with CaptureQueriesContext(connection) as ten:
        assert _allocate(small_client, small).status_code == 200

    with django_assert_max_num_queries(len(ten)):
        response = _allocate(large_client, large)

    assert response.status_code == 200
    assert response.json()["instant"] is (free == "up")


# -- with real hosts -----------------------------------------------------------------------------


def test_a_down_vm_handed_out_is_started_where_the_scheduler_places_it(real_pool, taker, sim_hosts):
    pool = real_pool(size=2, prestarted_vms=0)
    run_queued_tasks()
    user, client = taker(pool)

    body = _allocate(client, pool).json()
    run_queued_tasks()

    job = client.get(f"/api/jobs/{body['job']['id']}/").json()
    assert job["state"] == "succeeded", job["error"]
    assert job["result"]["placement"]["order"][0] == job["result"]["host"]
    shown = client.get(f"/api/vms/{body['vm']['id']}/").json()
    assert (shown["status"], shown["owner"]) == ("up", user.username)
    assert shown["host"] in [host.pk for host in sim_hosts]
