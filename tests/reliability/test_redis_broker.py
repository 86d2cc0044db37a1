"""django-q2 on Redis (REDIS_URL): the web process queues jobs in Redis, a task cluster runs
them from there, and the database queue (django-q2's ORM broker) is never used.

Django-q2 reads Q_CLUSTER once, when it is imported, and this test process has long imported
it with the settings of the suite; so both sides run as child processes started with
REDIS_URL: a gunicorn web process that takes the API requests and a task cluster. Each run
uses its own queue name (Q_CLUSTER_NAME), and its keys are deleted before and after, so runs
sharing a Redis do not see each other's tasks.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pytest
import redis
import requests
from django_q.models import OrmQ, Task

from hosts import driver
from hosts.models import Job, JobState, VirtualMachine
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.sync import status_for
from tests.conftest import wait_until
from tests.reliability.conftest import token_for

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
SETTLE_S = 90


def _redis_problem(url: str) -> str:
    """Why Redis cannot be used at ``url`` ("" when it answers a PING)."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, ValueError) as exc:
        return f"no Redis answers at {url} ({exc}); set REDIS_URL to run the broker tests"
    return ""


REDIS_PROBLEM = _redis_problem(REDIS_URL)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(REDIS_PROBLEM), reason=REDIS_PROBLEM or "Redis answers"),
]


@dataclass
class RedisQueue:
    client: redis.Redis
    name: str

    @property
    def env(self) -> dict[str, str]:
        """What a web process or task cluster needs to use this queue."""
        return {"REDIS_URL": REDIS_URL, "Q_CLUSTER_NAME": self.name}

    @property
    def waiting(self) -> int:
        """Tasks waiting in the queue (django-q2's Redis list)."""
        return self.client.llen(f"django_q:{self.name}:q")

    def clusters(self) -> list[bytes]:
        """The statistics keys of the task clusters consuming this queue (kept while they run)."""
        return self.client.keys(f"django_q:{self.name}:cluster:*")

    def clear(self) -> None:
        keys = self.client.keys(f"django_q:{self.name}:*")
        if keys:
            self.client.delete(*keys)


@pytest.fixture
def redis_queue():
    """A queue of its own in Redis, emptied before and after the test."""
    queue = RedisQueue(redis.Redis.from_url(REDIS_URL), f"corral-test-{uuid.uuid4().hex[:10]}")
    queue.clear()
    yield queue
    queue.clear()
    queue.client.close()


def _host_says(vm: VirtualMachine) -> str:
    return status_for(driver.domain_power_state(vm.host.uri, str(vm.uuid)))


def test_jobs_queued_through_the_web_wait_in_redis_until_a_task_cluster_runs_them(
    sim_vm, make_user, redis_queue, web_server, task_cluster
):
    vms = [sim_vm() for _ in range(4)]
    headers = token_for(make_user(superuser=True))
    web = web_server(**redis_queue.env)

    answers = [
        requests.post(f"{web.url}/api/vms/{vm.pk}/start/", headers=headers, timeout=60)
        for vm in vms
    ]
    # Queued behind the first VM's start: handed to a worker by the worker that ends the start.
    answers.append(
        requests.post(f"{web.url}/api/vms/{vms[0].pk}/poweroff/", headers=headers, timeout=60)
    )

    assert [a.status_code for a in answers] == [202] * 5
    job_ids = [a.json()["id"] for a in answers]
    assert redis_queue.waiting == 4  # one task per VM: the head of each VM's queue
    assert not OrmQ.objects.exists()

    cluster = task_cluster(CORRAL_TICKER_RUN_SECONDS="2", **redis_queue.env)
    in_orm_queue = []

    def all_ended() -> bool:
        in_orm_queue.append(OrmQ.objects.count())
        return not Job.objects.filter(pk__in=job_ids, state__in=ACTIVE_JOB_STATES).exists()

    wait_until(all_ended, timeout=SETTLE_S, message=lambda: cluster.log()[-3000:])

    jobs = Job.objects.filter(pk__in=job_ids).order_by("pk")
    assert [(j.kind, j.state, j.error_message) for j in jobs] == [
        ("start", JobState.SUCCEEDED, ""),
        ("start", JobState.SUCCEEDED, ""),
        ("start", JobState.SUCCEEDED, ""),
        ("start", JobState.SUCCEEDED, ""),
        ("poweroff", JobState.SUCCEEDED, ""),
    ]
    assert max(in_orm_queue) == 0
    assert not OrmQ.objects.exists()
    # django-q2 records every task it ran; these came out of the Redis list.
    wanted = {f"job-{job_id}" for job_id in job_ids}
    wait_until(
        lambda: set(Task.objects.filter(name__in=wanted).values_list("name", flat=True)) == wanted,
        timeout=SETTLE_S,
        message=lambda: f"tasks recorded: {list(Task.objects.values_list('name', flat=True))}",
    )
    wait_until(redis_queue.clusters, timeout=30, message="the cluster keeps no statistics in Redis")
    states = {
        vm.name: (vm.status, _host_says(vm)) for vm in VirtualMachine.objects.select_related("host")
    }
    assert states == {
        vms[0].name: ("down", "down"),
        **{vm.name: ("up", "up") for vm in vms[1:]},
    }


def test_what_is_asked_while_redis_is_down_is_accepted_and_runs_once_redis_is_back(
    sim_vm,
    running_vm,
    sim_cluster,
    small_template,
    make_pool,
    make_user,
    web_server,
    task_cluster,
    tmp_path,
):
    """Redis restarting (it keeps nothing on disk) must not turn a request into a 500: a VM's
    start and a prestarted VM taken from a pool (with the pool's nudge to prestart another)
    are committed and answered as usual; the start runs once Redis answers again."""
    from lab.soak.services import Redis

    broker = Redis(tmp_path).start()
    env = {"REDIS_URL": broker.url, "Q_CLUSTER_NAME": f"corral-test-{uuid.uuid4().hex[:10]}"}
    vm = sim_vm()
    pool = make_pool(cluster=sim_cluster, template=small_template, size=2, prestarted_vms=1)
    pool_vm = running_vm(pool=pool)
    headers = token_for(make_user(superuser=True))
    web = web_server(**env)
    try:
        broker.kill()
        started = requests.post(f"{web.url}/api/vms/{vm.pk}/start/", headers=headers, timeout=60)
        taken = requests.post(
            f"{web.url}/api/vmpools/{pool.pk}/allocatevm/", headers=headers, timeout=60
        )
        assert (started.status_code, taken.status_code) == (202, 200), (
            started.text[:300],
            taken.text[:300],
        )
        assert (taken.json()["vm"]["id"], taken.json()["instant"]) == (pool_vm.pk, True)
        job_ids = [started.json()["id"]]
        assert list(Job.objects.filter(pk__in=job_ids).values_list("vm", "kind", "state")) == [
            (vm.pk, "start", JobState.PENDING)
        ]

        broker.start()
        cluster = task_cluster(CORRAL_JOB_DISPATCH_RETRY="2", **env)
        wait_until(
            lambda: Job.objects.filter(pk__in=job_ids, state=JobState.SUCCEEDED).count() == 1,
            timeout=SETTLE_S,
            message=lambda: (
                f"{list(Job.objects.filter(pk__in=job_ids).values('state'))}: "
                f"{cluster.log()[-3000:]}"
            ),
        )
        for each in (vm, pool_vm):
            each.refresh_from_db()
            assert (each.status, _host_says(each)) == ("up", "up")
    finally:
        broker.stop()
