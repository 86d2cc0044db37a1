"""What one allocation costs in SQL statements: at most 12 for the whole request, including
what runs at commit (the job's hand-over, the monitor nudge, the feed's NOTIFY), whatever the
pool's size and however many grants the user holds; the hand-over of a prestarted VM (running,
no job to queue) at most 10 (11 with a token's lookup: docs/benchmarks.md) within the
monitor nudge's interval after another, 11 when it queues the nudge."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from hosts import jobs
from hosts.models import JobKind, VirtualMachine, VmStatus
from hosts.tasks import run_job
from pools.models import VmPool
from tests.pools.fixtures import add_pool_vms, queued_tasks

pytestmark = pytest.mark.django_db

MAX_STATEMENTS = 12
HANDOVER_STATEMENTS = 10


@pytest.fixture
def allocate(client_for, django_assert_max_num_queries, django_capture_on_commit_callbacks):
    """allocate(user, pool, most=MAX_STATEMENTS) -> the response, asserting the request and
    its commit-time work took at most ``most`` statements."""

    def run(user, pool, most: int = MAX_STATEMENTS):
        client = client_for(user)
        with (
            django_assert_max_num_queries(most),
            django_capture_on_commit_callbacks(execute=True),
        ):
            response = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")
        assert response.status_code == 200, response.json()
        return response.json()

    return run


def _pool_with_one_free(pool_of, make_user, size: int, free: str):
    """A pool of ``size`` VMs where only one, ``free`` (up or down), is left to take."""
    pool = pool_of(down=size - 1, prestarted_vms=1, max_user_vms=2)
    [vm] = add_pool_vms(pool, [VmStatus.DOWN if free == "being started" else free])
    VirtualMachine.objects.filter(pool=pool).exclude(pk=vm.pk).update(owner=make_user())
    return pool, vm


def nudged_lately(pool) -> None:
    """As in a run of hand-overs: the last one queued the prestart monitor's nudge, so this
    one, within ``VMPOOL_NUDGE_INTERVAL``, queues none."""
    VmPool.objects.filter(pk=pool.pk).update(nudge_due_at=timezone.now() + timedelta(seconds=5))


def test_a_handover_that_queues_the_monitors_nudge_takes_one_statement_more(
    pool_of, make_user, pool_user, allocate
):
    pool, vm = _pool_with_one_free(pool_of, make_user, 5, VmStatus.UP)

    body = allocate(pool_user(pool), pool, HANDOVER_STATEMENTS + 1)

    assert body["vm"]["id"] == vm.pk
    assert VmPool.objects.get(pk=pool.pk).nudge_due_at > timezone.now()


@pytest.mark.parametrize("size", [1, 50])
@pytest.mark.parametrize("free", [VmStatus.UP, "being started", VmStatus.DOWN])
def test_an_allocation_takes_at_most_12_statements_from_a_pool_of_1_or_50_vms(
    size, free, pool_of, make_user, pool_user, allocate
):
    pool, vm = _pool_with_one_free(pool_of, make_user, size, free)
    start = jobs.submit(JobKind.START, vm=vm) if free == "being started" else None

    most = MAX_STATEMENTS
    if free == VmStatus.UP:
        nudged_lately(pool)
        most = HANDOVER_STATEMENTS
    body = allocate(pool_user(pool), pool, most)

    assert (body["vm"]["id"], body["instant"]) == (vm.pk, free == VmStatus.UP)
    assert (body["job"] is None) is (free == VmStatus.UP)
    if start is not None:
        assert body["job"]["id"] == start.pk


@pytest.mark.parametrize("grants", [1, 20])
def test_an_allocation_takes_at_most_12_statements_for_a_user_with_1_or_20_grants(
    grants, pool_of, make_user, pool_user, grant, allocate
):
    pool, vm = _pool_with_one_free(pool_of, make_user, 3, VmStatus.DOWN)
    user = pool_user(pool)
    for _ in range(grants - 1):
        other = pool_of(down=1)
        group = Group.objects.create(name=f"takers-{other.pk}")
        group.user_set.add(user)
        grant(group if other.pk % 2 else user, "UserRole", other)
        grant(user, "PowerUser", VirtualMachine.objects.filter(pool=other).first())

    body = allocate(user, pool)

    assert body["vm"]["id"] == vm.pk
    assert body["job"]["kind"] == "start"
    assert VirtualMachine.objects.get(pk=vm.pk).owner == user


def test_a_superuser_handover_takes_at_most_10_statements(pool_of, make_user, allocate):
    pool, vm = _pool_with_one_free(pool_of, make_user, 5, VmStatus.UP)
    boss = make_user(superuser=True)
    nudged_lately(pool)

    body = allocate(boss, pool, HANDOVER_STATEMENTS)

    assert (body["vm"]["id"], body["vm"]["owner"], body["instant"]) == (vm.pk, boss.username, True)


def test_the_answer_needs_no_second_read_of_the_vm_or_the_job(
    pool_of, make_user, pool_user, allocate
):
    pool, vm = _pool_with_one_free(pool_of, make_user, 2, VmStatus.DOWN)
    user = pool_user(pool)

    body = allocate(user, pool)

    assert (body["vm"]["name"], body["vm"]["owner"], body["vm"]["cluster"]) == (
        vm.name,
        user.username,
        pool.cluster_id,
    )
    assert (body["job"]["state"], body["job"]["journal"], body["job"]["vm"]) == (
        "pending",
        [],
        vm.pk,
    )
    # The start was handed to a task worker at commit.
    assert [task.args() for task in queued_tasks(run_job)] == [(body["job"]["id"],)]


@pytest.mark.parametrize("where", ["system", "cluster", "pool", "pool through a group"])
def test_user_role_granted_at_any_scope_of_the_pool_lets_the_user_take_a_vm(
    where, pool_of, make_user, grant, allocate
):
    pool, vm = _pool_with_one_free(pool_of, make_user, 2, VmStatus.UP)
    user = make_user()
    scope = {"system": None, "cluster": pool.cluster}.get(where, pool)
    principal = user
    if where.endswith("group"):
        principal = Group.objects.create(name=f"takers-{pool.pk}")
        principal.user_set.add(user)
    grant(principal, "UserRole", scope)

    assert allocate(user, pool)["vm"]["id"] == vm.pk


def test_user_role_on_another_cluster_finds_no_pool(
    pool_of, make_user, make_cluster, grant, client_for
):
    pool, _ = _pool_with_one_free(pool_of, make_user, 2, VmStatus.UP)
    user = make_user()
    grant(user, "UserRole", make_cluster())

    response = client_for(user).post(f"/api/vmpools/{pool.pk}/allocatevm/")

    assert response.status_code == 404
