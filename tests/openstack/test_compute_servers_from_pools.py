"""``server create`` with a pool's flavor follows the pool's rules, as the portal and /api/ do:
a pool user at the pool's limit per user, or before an empty pool, is refused up front with
Nova's status and the pool's own words, and nothing is made (no VM, no ERROR server); several
servers at once are made up to the limit, as Nova's quotas allow (``min_count``)."""

from __future__ import annotations

import base64

import pytest

from hosts.models import VirtualMachine, VmStatus
from openstack.models import Server
from tests.pools.fixtures import add_pool_vms

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"
LATEST = {"HTTP_OPENSTACK_API_VERSION": "compute 2.37"}


@pytest.fixture
def pool_flavor(sim_cluster, make_template, make_pool):
    """pool_flavor(up, **pool) -> a pool of ``up`` running VMs whose template is the flavor
    ``ci.node`` (offered in every cluster, as the lab's templates are)."""

    def make(up: int, **fields):
        template = make_template("ci.node", memory_mb=128, disk_gb=1)
        pool = make_pool(cluster=sim_cluster, template=template, size=up, **fields)
        add_pool_vms(pool, [VmStatus.UP] * up)
        return pool

    return make


@pytest.fixture
def pool_user_for(make_user, grant):
    """pool_user_for(pool) -> a user who may take VMs from the pool and nothing else."""

    def make(pool):
        user = make_user()
        grant(user, "UserRole", pool)
        return user

    return make


def create(client, **server):
    body = {"server": {"name": "ci", "flavorRef": "ci.node", "networks": "auto", **server}}
    return client.post(f"{V}/servers", body, format="json", **LATEST)


def _made() -> tuple[int, int]:
    """How many VMs and Nova server records there are."""
    return VirtualMachine.objects.count(), Server.objects.count()


def test_a_pool_user_at_the_pools_limit_is_refused_with_novas_403_and_nothing_is_made(
    pool_flavor, pool_user_for, nova_for
):
    pool = pool_flavor(up=2, max_user_vms=1)
    user = pool_user_for(pool)
    nova = nova_for(user)
    assert create(nova, name="first").status_code == 202
    before = _made()

    refused = create(nova, name="second")

    assert refused.status_code == 403
    assert refused.json() == {
        "forbidden": {
            "code": 403,
            "message": f"You hold 1 VM(s) of {pool.name}, its limit per user; return one "
            "before taking another.",
        }
    }
    assert _made() == before
    assert [server["name"] for server in nova.get(f"{V}/servers").json()["servers"]] == ["first"]


def test_an_empty_pool_is_novas_409_with_the_pools_words_and_nothing_is_made(
    pool_flavor, pool_user_for, nova_for, make_user
):
    pool = pool_flavor(up=1)
    VirtualMachine.objects.filter(pool=pool).update(owner=make_user())
    nova = nova_for(pool_user_for(pool))
    before = _made()

    refused = create(nova)

    assert refused.status_code == 409
    assert refused.json() == {
        "conflictingRequest": {
            "code": 409,
            "message": f"Pool {pool.name} has no free VM left; try again later.",
        }
    }
    assert _made() == before


def test_several_servers_are_made_up_to_the_pools_limit_and_min_count_beyond_it_makes_none(
    pool_flavor, pool_user_for, nova_for
):
    pool = pool_flavor(up=3, max_user_vms=2)
    user = pool_user_for(pool)
    nova = nova_for(user)

    too_many = create(nova, name="node", min_count=3, max_count=3)
    assert too_many.status_code == 403
    assert "its limit per user" in too_many.json()["forbidden"]["message"]
    assert (_made(), VirtualMachine.objects.filter(owner=user).count()) == ((3, 0), 0)

    made = create(nova, name="node", max_count=3)
    assert made.status_code == 202, made.content
    listed = nova.get(f"{V}/servers/detail").json()["servers"]
    assert sorted((server["name"], server["status"]) for server in listed) == [
        ("node-1", "ACTIVE"),
        ("node-2", "ACTIVE"),
    ]
    assert VirtualMachine.objects.filter(pool=pool, owner=user).count() == 2


def test_a_pool_user_asking_for_a_first_boot_is_refused_with_novas_403_not_an_error_server(
    pool_flavor, pool_user_for, nova_for
):
    pool = pool_flavor(up=1)
    nova = nova_for(pool_user_for(pool))
    before = _made()

    refused = create(nova, user_data=base64.b64encode(b"#cloud-config\n").decode())

    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == (
        "You may not create servers of flavor ci.node: no availability zone lets you create "
        f"VMs. Pool {pool.name} hands out running servers of this flavor, without user_data, "
        "a server group or an image of their own."
    )
    assert _made() == before
