"""The real ``openstack`` CLI against a running Corral, as a pool user (UserRole on one pool,
nothing else): ``server create`` with the pool's flavor hands over the pool's running VM at
once; one more, past the pool's limit per user, is refused up front in the pool's words (Nova's
403), and no ERROR server is left behind."""

from __future__ import annotations

import pytest

from hosts.models import VirtualMachine, VmStatus
from tests.openstack.conftest import as_json
from tests.pools.fixtures import add_pool_vms

pytestmark = pytest.mark.slow


@pytest.fixture
def bobs_pool(sim_cluster, make_template, make_image, make_pool, make_user, grant):
    """Pool ``ci`` of two running VMs of flavor ``ci.node`` and image ``ci-disk``, one per user;
    bob may take them."""
    image = make_image(name="ci-disk")
    template = make_template("ci.node", memory_mb=128, disk_gb=1, disk_image=image)
    pool = make_pool(cluster=sim_cluster, template=template, name="ci", size=2, max_user_vms=1)
    add_pool_vms(pool, [VmStatus.UP, VmStatus.UP])
    grant(make_user("bob"), "UserRole", pool)
    return pool


def test_the_cli_takes_a_pools_vm_and_past_the_pools_limit_is_told_why(bobs_pool, cloud):
    run = cloud("bob")

    create = ("server", "create", "--flavor", "ci.node", "--image", "ci-disk", "--nic", "auto")
    created = as_json(run(*create, "-f", "json", "first"))
    refused = run(*create, "second", ok=False)
    listed = as_json(run("server", "list", "-f", "json"))

    assert created["status"] == "ACTIVE"
    assert VirtualMachine.objects.get(uuid=created["id"]).pool == bobs_pool
    assert refused.stderr.startswith("ForbiddenException: 403: ")
    assert refused.stderr.endswith(
        "You hold 1 VM(s) of ci, its limit per user; return one before taking another."
    )
    assert [(server["Name"], server["Status"]) for server in listed] == [("first", "ACTIVE")]
    assert VirtualMachine.objects.count() == 2  # no VM was made
