"""Concurrent requests of one user never pass their quota together (PostgreSQL: the user's row
is locked before the use is read): creating VMs through the API, taking pool VMs, and growing
stopped VMs."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import close_old_connections, connection
from rest_framework.test import APIClient

from hosts.models import Quota, VirtualMachine
from project.access.grants import grant_role
from project.models import Role

REQUESTS = 12
ALLOWED = 3


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent requests need PostgreSQL's row locks; SQLite has one writer")


def _at_once(user, method: str, paths: list[tuple[str, dict | None]]) -> list[int]:
    """Each (path, body) requested by ``user`` at the same time; the statuses answered."""

    def send(request) -> int:
        path, body = request
        close_old_connections()
        try:
            client = APIClient()
            client.force_authenticate(user)
            return getattr(client, method)(path, body, format="json").status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=REQUESTS) as workers:
        return list(workers.map(send, paths))


def test_concurrent_vm_creations_stop_exactly_at_the_limit(
    postgres_only, make_user, make_cluster, make_template
):
    user, cluster = make_user(), make_cluster()
    grant_role(Role.objects.get(name="PowerUser"), cluster, user=user)
    Quota.objects.create(vms=ALLOWED)  # the default: a user row only raises it
    template = make_template(vcpus=1, memory_mb=128, disk_gb=1)
    body = {"cluster": cluster.pk, "template": template.pk}

    statuses = _at_once(
        user, "post", [("/api/vms/", {**body, "name": f"vm{n}"}) for n in range(REQUESTS)]
    )

    assert sorted(statuses) == [201] * ALLOWED + [409] * (REQUESTS - ALLOWED)
    assert VirtualMachine.objects.filter(owner=user).count() == ALLOWED


def test_concurrent_allocations_stop_exactly_at_the_limit(postgres_only, make_user, pool_of):
    pool = pool_of(up=REQUESTS, max_user_vms=REQUESTS)
    user = make_user()
    grant_role(Role.objects.get(name="UserRole"), pool, user=user)
    Quota.objects.create(vms=ALLOWED)

    statuses = _at_once(user, "post", [(f"/api/vmpools/{pool.pk}/allocatevm/", None)] * REQUESTS)

    assert sorted(statuses) == [200] * ALLOWED + [409] * (REQUESTS - ALLOWED)
    assert VirtualMachine.objects.filter(pool=pool, owner=user).count() == ALLOWED


def test_concurrent_growths_stop_exactly_at_the_limit(
    postgres_only, make_user, make_cluster, make_template, make_vm
):
    user, cluster = make_user(), make_cluster()
    grant_role(Role.objects.get(name="PowerUser"), cluster, user=user)
    Quota.objects.create(vcpus=REQUESTS + ALLOWED)  # one each, and room for ALLOWED more
    template = make_template(vcpus=1, memory_mb=128, disk_gb=1)
    vms = [make_vm(cluster, template, owner=user, status="down") for _ in range(REQUESTS)]
    for vm in vms:  # as the API's creation grants its maker
        grant_role(Role.objects.get(name="UserVmManager"), vm, user=user)

    statuses = _at_once(user, "patch", [(f"/api/vms/{vm.pk}/", {"vcpus": 2}) for vm in vms])

    assert sorted(statuses) == [200] * ALLOWED + [409] * (REQUESTS - ALLOWED)
    assert sorted(VirtualMachine.objects.filter(owner=user).values_list("vcpus", flat=True)) == (
        [1] * (REQUESTS - ALLOWED) + [2] * ALLOWED
    )
