"""Many users taking VMs from one pool at the same moment (PostgreSQL: row locks, SKIP LOCKED):
every request is answered, no VM goes to two users, no user passes the limit."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import close_old_connections, connection, transaction
from rest_framework.test import APIClient

from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from project.access.grants import grant_role
from project.models import Role
from tests.conftest import unique
from tests.pools.fixtures import add_pool_vms

User = get_user_model()
THREADS = 20


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent allocation needs PostgreSQL's row locks; SQLite has one writer")


def _users_of(pool, count: int) -> list:
    """``count`` users who may take VMs from the pool (UserRole through one group)."""
    group = Group.objects.create(name=unique("pool-users"))
    users = User.objects.bulk_create(User(username=unique("taker")) for _ in range(count))
    group.user_set.add(*users)
    grant_role(Role.objects.get(name="UserRole"), pool, group=group)
    return list(User.objects.filter(groups=group).order_by("pk"))


def _allocate_all(pool, users: list) -> list[tuple[int, dict]]:
    """One allocation request per entry of ``users``, all at once on a pool of threads;
    (status, body) of every answer."""

    def allocate(user) -> tuple[int, dict]:
        close_old_connections()
        try:
            client = APIClient()
            client.force_authenticate(user)
            response = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")
            return response.status_code, response.json()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=THREADS) as workers:
        return list(workers.map(allocate, users))


def test_two_hundred_users_at_once_share_out_the_pool_without_giving_a_vm_twice(
    postgres_only, pool_of
):
    pool = pool_of(up=50, down=20)
    users = _users_of(pool, 200)

    answers = _allocate_all(pool, users)

    assert len(answers) == 200
    assert Counter(status for status, _ in answers) == {200: 70, 409: 130}
    given = [body for status, body in answers if status == 200]
    instant = [body for body in given if body["instant"]]
    started = [body for body in given if not body["instant"]]
    assert len(instant) == 50 and all(body["job"] is None for body in instant)
    assert {body["vm"]["status"] for body in instant} == {VmStatus.UP}
    assert len(started) == 20 and all(body["job"]["kind"] == "start" for body in started)
    assert {body["vm"]["status"] for body in started} == {VmStatus.DOWN}
    refused = {body["detail"] for status, body in answers if status == 409}
    assert refused == {f"Pool {pool.name} has no free VM left; try again later."}
    vm_ids = [body["vm"]["id"] for body in given]
    assert len(set(vm_ids)) == 70
    owners = dict(VirtualMachine.objects.filter(pool=pool).values_list("pk", "owner__username"))
    assert {body["vm"]["id"]: body["vm"]["owner"] for body in given} == owners
    starts = Job.objects.filter(vm__pool=pool, kind=JobKind.START, state=JobState.PENDING)
    assert sorted(starts.values_list("vm_id", flat=True)) == sorted(
        body["vm"]["id"] for body in started
    )


def test_one_user_firing_ten_requests_at_once_gets_exactly_max_user_vms(postgres_only, pool_of):
    pool = pool_of(up=10, max_user_vms=2)
    [user] = _users_of(pool, 1)

    answers = _allocate_all(pool, [user] * 10)

    assert Counter(status for status, _ in answers) == {200: 2, 409: 8}
    assert VirtualMachine.objects.filter(pool=pool, owner=user).count() == 2
    assert {body["detail"] for status, body in answers if status == 409} == {
        f"You hold 2 VM(s) of {pool.name}, its limit per user; return one before taking another."
    }


def test_a_vm_locked_by_another_transaction_is_skipped_without_waiting(postgres_only, pool_of):
    pool = pool_of(up=2, down=1)
    [user] = _users_of(pool, 1)
    first, second = VirtualMachine.objects.filter(pool=pool, status=VmStatus.UP).order_by(
        "pool_index", "pk"
    )
    answered = threading.Event()
    answers = []

    def allocate() -> None:
        close_old_connections()
        try:
            client = APIClient()
            client.force_authenticate(user)
            response = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")
            answers.append((response.status_code, response.json()))
        finally:
            connection.close()
            answered.set()

    taker = threading.Thread(target=allocate)
    with transaction.atomic():
        # Another request (a return, an admin action) holds the first free VM's row.
        VirtualMachine.objects.select_for_update().get(pk=first.pk)
        taker.start()
        answered_while_locked = answered.wait(timeout=20)
    taker.join(timeout=20)

    assert answered_while_locked, "the allocation waited for the locked VM"
    [(status, body)] = answers
    assert status == 200, body
    assert (body["vm"]["id"], body["vm"]["status"], body["instant"]) == (
        second.pk,
        VmStatus.UP,
        True,
    )
    assert VirtualMachine.objects.get(pk=first.pk).owner_id is None
    assert VirtualMachine.objects.get(pk=second.pk).owner_id == user.pk


def test_users_racing_for_vms_whose_keys_jobs_run_get_one_each_and_their_keys_job_follows(
    postgres_only, make_pool, make_host, make_template
):
    """A running VM whose guest_keys job waits for its agent is taken like one with no job:
    once, and with that job superseded by one for its new holder (pools/takeable.py)."""
    host = make_host()
    template = make_template(memory_mb=128, login_user="corral", guest_agent=True)
    pool = make_pool(cluster=host.cluster, template=template, size=10)
    for vm in add_pool_vms(pool, [VmStatus.UP] * 10, host=host):
        Job.objects.create(kind=JobKind.GUEST_KEYS, vm=vm, state=JobState.RUNNING)
    users = _users_of(pool, 30)

    answers = _allocate_all(pool, users)

    given = [body for status, body in answers if status == 200]
    assert Counter(status for status, _ in answers) == {200: 10, 409: 20}
    assert all(body["instant"] for body in given)
    assert len({body["vm"]["id"] for body in given}) == 10
    for vm in VirtualMachine.objects.filter(pool=pool).select_related("owner"):
        jobs_on_vm = Job.objects.filter(vm=vm).order_by("pk")
        assert [(job.kind, job.state, job.requested_by) for job in jobs_on_vm] == [
            (JobKind.GUEST_KEYS, JobState.CANCELLING, None),
            (JobKind.GUEST_KEYS, JobState.PENDING, vm.owner),
        ]
