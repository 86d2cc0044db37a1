"""A burst of allocations queues one prestart monitor task per pool per interval, not one each
(PostgreSQL, concurrent requests); once the interval has passed an allocation queues again.
That one nudge still refills the pool: a run that started a full batch queues the next."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import close_old_connections, connection
from django.utils import timezone
from rest_framework.test import APIClient

from pools.tasks import run_monitor_on_nudge
from project.access.grants import grant_role
from project.models import Role
from tests.conftest import unique
from tests.pools.fixtures import prestart_jobs, queued_tasks, run_queued_tasks

User = get_user_model()


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent allocations need PostgreSQL; SQLite has one writer")


def _takers(pool, count: int) -> list:
    group = Group.objects.create(name=unique("takers"))
    users = User.objects.bulk_create(User(username=unique("taker")) for _ in range(count))
    group.user_set.add(*users)
    grant_role(Role.objects.get(name="UserRole"), pool, group=group)
    return list(User.objects.filter(groups=group).order_by("pk"))


def _allocate_all(pool, users: list) -> list[int]:
    def allocate(user) -> int:
        close_old_connections()
        try:
            client = APIClient()
            client.force_authenticate(user)
            return client.post(f"/api/vmpools/{pool.pk}/allocatevm/").status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=10) as workers:
        return list(workers.map(allocate, users))


def _nudges(pool) -> int:
    return sum(1 for task in queued_tasks(run_monitor_on_nudge) if task.args() == (pool.pk,))


def test_thirty_allocations_at_once_queue_one_monitor_task_then_again_after_the_interval(
    postgres_only, pool_of, settings, time_machine
):
    settings.VMPOOL_NUDGE_INTERVAL = 30
    time_machine.move_to(timezone.now(), tick=False)  # time passes only when shifted
    pool = pool_of(up=31, prestarted_vms=31)
    other = pool_of(up=1, prestarted_vms=1)
    users = _takers(pool, 31)

    answers = _allocate_all(pool, users[:30])

    assert answers == [200] * 30
    assert _nudges(pool) == 1
    # Another pool's nudge is its own.
    assert _allocate_all(other, _takers(other, 1)) == [200]
    assert _nudges(other) == 1

    time_machine.shift(31)
    assert _allocate_all(pool, users[30:]) == [200]

    assert _nudges(pool) == 2


def test_allocations_within_the_interval_queue_nothing_more(
    postgres_only, pool_of, settings, time_machine
):
    settings.VMPOOL_NUDGE_INTERVAL = 30
    time_machine.move_to(timezone.now(), tick=False)
    pool = pool_of(up=3, prestarted_vms=3)
    users = _takers(pool, 3)
    assert _allocate_all(pool, users[:1]) == [200]

    time_machine.shift(29)
    assert _allocate_all(pool, users[1:]) == [200, 200]

    assert _nudges(pool) == 1


def test_the_one_nudge_of_a_burst_brings_the_pool_back_to_its_level_batch_by_batch(
    db, pool_of, settings, pool_user, client_for, django_capture_on_commit_callbacks
):
    settings.VMPOOL_MONITOR_BATCH_SIZE = 5
    pool = pool_of(up=12, down=24, prestarted_vms=12, max_user_vms=12)
    client = client_for(pool_user(pool))
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(12):
            assert client.post(f"/api/vmpools/{pool.pk}/allocatevm/").status_code == 200
    assert _nudges(pool) == 1

    runs = run_queued_tasks()

    assert prestart_jobs(pool).count() == 12  # the 12 VMs taken are replaced
    assert runs == 3  # 5 + 5 + 2 starts
