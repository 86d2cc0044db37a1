"""Fixtures for the VM pool tests: pools whose VMs are rows in a chosen state, pool users, pools
on the simulated hosts, and running queued tasks in this process as a worker would.

Loaded for the whole suite (tests/conftest.py): the VM portal, admin, browser and reliability
tests use them too."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django_q.models import OrmQ
from guardian.models import UserObjectPermission

from hosts import jobs
from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from hosts.operations import OPERATION_BY_KIND
from hosts.tasks import run_job
from pools import monitor, services, tasks
from pools.models import VmPool
from project.models import Role
from project.workers import task_path
from tests.conftest import unique


@pytest.fixture
def pool_template(make_template):
    """1 vCPU and 128 MiB, so many VMs fit on a simulated host."""
    return make_template(vcpus=1, memory_mb=128, disk_gb=1)


@pytest.fixture
def real_pool(transactional_db, sim_cluster, make_template):
    """real_pool(size, prestarted_vms, **fields) -> a pool made as the API makes it, on the
    simulated hosts (its prepare jobs and the monitor's nudge queued, nothing run yet)."""

    def make(size: int, prestarted_vms: int, **fields) -> VmPool:
        template = make_template(memory_mb=128, vcpus=1, disk_gb=1, cluster=sim_cluster)
        pool = VmPool(
            name=fields.pop("name", unique("lab")),
            cluster=sim_cluster,
            template=template,
            size=size,
            prestarted_vms=prestarted_vms,
            **fields,
        )
        pool.full_clean()
        return services.create_pool(pool)

    return make


def add_pool_vms(pool: VmPool, statuses: list[str], **fields) -> list[VirtualMachine]:
    """Rows for the pool's next VMs, one per status, numbered on from the pool's last VM."""
    last = VirtualMachine.objects.filter(pool=pool).order_by("-pool_index").first()
    start = (last.pool_index if last else 0) + 1
    template = pool.template
    made = VirtualMachine.objects.bulk_create(
        VirtualMachine(
            name=pool.vm_name(start + i),
            cluster_id=pool.cluster_id,
            template=template,
            pool=pool,
            pool_index=start + i,
            status=status,
            vcpus=template.vcpus,
            memory_mb=template.memory_mb,
            disk_gb=template.disk_gb,
            **fields,
        )
        for i, status in enumerate(statuses)
    )
    return list(VirtualMachine.objects.filter(pk__in=[vm.pk for vm in made]).order_by("pk"))


@pytest.fixture
def pool_of(make_pool, make_cluster, pool_template):
    """pool_of(up=0, down=0, cluster=None, **pool_fields) -> a pool whose VMs are rows: the Up
    ones first (lowest numbers), then the Down ones. No host is involved."""

    def make(up: int = 0, down: int = 0, cluster=None, **fields) -> VmPool:
        fields.setdefault("size", up + down)
        fields.setdefault("name", unique("lab"))
        pool = make_pool(cluster=cluster or make_cluster(), template=pool_template, **fields)
        add_pool_vms(pool, [VmStatus.UP] * up + [VmStatus.DOWN] * down)
        return pool

    return make


@pytest.fixture
def pool_user(make_user, grant):
    """pool_user(pool) -> a user holding UserRole on the pool (may take VMs from it)."""

    def make(pool: VmPool, username: str | None = None):
        user = make_user(username)
        grant(user, "UserRole", pool)
        return user

    return make


@pytest.fixture
def held_on(make_template, pool_user, client_for):
    """held_on(host, size=1) -> (vm, user, client): a user holds a running VM of an automatic,
    stateless pool of ``size`` VMs (one kept running for the next user) on ``host``, alone in
    its cluster; the pool's jobs run in this process."""

    def make(host, size: int = 1):
        template = make_template(memory_mb=128, vcpus=1, disk_gb=1, cluster=host.cluster)
        pool = VmPool(
            name=unique("lab"), cluster=host.cluster, template=template, size=size, prestarted_vms=1
        )
        pool.full_clean()
        services.create_pool(pool)
        run_queued_tasks()
        user = pool_user(pool)
        client = client_for(user)
        taken = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")
        assert taken.status_code == 200, taken.json()
        run_queued_tasks()
        vm = VirtualMachine.objects.get(pk=taken.json()["vm"]["id"])
        assert (vm.status, vm.host_id, vm.owner_id) == ("up", host.pk, user.pk)
        return vm, user, client

    return make


def pool_vms(pool: VmPool) -> list[VirtualMachine]:
    return list(VirtualMachine.objects.filter(pool=pool).order_by("pool_index"))


def queued_tasks(func: Callable | None = None) -> list[OrmQ]:
    """The django-q tasks waiting in the ORM broker (optionally those of one task function)."""
    waiting = list(OrmQ.objects.order_by("id"))
    return [task for task in waiting if func is None or task.func() == task_path(func)]


# What a task worker would call for each task the application queues (the task bodies without
# their closing of stale connections, which would end the test's transaction).
TASK_BODIES = {
    task_path(run_job): lambda job_id: jobs.run(job_id, OPERATION_BY_KIND),
    task_path(tasks.run_monitor_on_nudge): tasks.run_nudged,
}


def run_queued_tasks(limit: int = 500) -> int:
    """Run the queued jobs and monitor nudges in this process, one at a time in the order
    they were queued (what a task cluster with one worker does); returns how many ran.

    Tasks queued while running (the next job of a VM, a nudge after a return) run too.
    """
    ran = 0
    while ran < limit:
        task = next(
            (t for t in queued_tasks() if t.func() in TASK_BODIES),
            None,
        )
        if task is None:
            return ran
        OrmQ.objects.filter(pk=task.pk).delete()
        TASK_BODIES[task.func()](*task.args(), **(task.kwargs() or {}))
        ran += 1
    raise AssertionError(f"tasks kept coming after {limit} runs")


def prestart_jobs(pool: VmPool):
    return Job.objects.filter(vm__pool=pool, kind=JobKind.START, params__reason=monitor.PRESTART)


@contextlib.contextmanager
def holding_grant_row(user, vm: VirtualMachine, seconds: float = 60):
    """While inside, another connection holds an uncommitted UserRole grant row for ``user`` on
    ``vm`` (rolled back on leaving): an allocation of ``vm`` to ``user`` that must insert that
    grant waits there, after it has assigned the VM and before it commits."""
    role = Role.objects.get(name="UserRole")
    permission = Permission.objects.get(
        content_type=ContentType.objects.get_for_model(VirtualMachine),
        codename=role.grant_codename,
    )
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                UserObjectPermission.objects.create(
                    user=user,
                    permission=permission,
                    content_type=permission.content_type,
                    object_pk=str(vm.pk),
                )
                holding.set()
                release.wait(seconds)
                transaction.set_rollback(True)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(20), "the grant row was never held"
        yield
    finally:
        release.set()
        holder.join(30)
