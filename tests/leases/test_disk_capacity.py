"""Reservations' disks against the reservable hosts' storage pools: a host whose pool reports
its free space holds only the instances whose disks fit there, leases overlapping in time
counting against each other; a host reporting no pool (simulated) is not limited by disk."""

import pytest

from leases.services import LeaseRefused
from tests.leases.fixtures import allocations_of, at, instances

pytestmark = pytest.mark.django_db
GIB = 1024**3


def with_disk(amount: int, disk_gb: int) -> dict:
    return {**instances(amount), "disk_gb": disk_gb}


def test_instances_whose_disks_do_not_fit_the_storage_pool_are_refused(
    reservable_hosts, make_lease
):
    reservable_hosts(1, storage_free_bytes=25 * GIB)

    with pytest.raises(LeaseRefused) as refused:
        make_lease(at(8), at(10), with_disk(3, 10))

    assert (
        "only 2 of 3 instances fit between "
        f"{at(8):%Y-%m-%d %H:%M} and {at(10):%Y-%m-%d %H:%M} (3 instances of 10 GB of disk "
        "need 30 GB of disk free; 25 are free)"
    ) in str(refused.value)


def test_overlapping_leases_share_the_storage_pool_and_later_ones_get_what_is_left(
    reservable_hosts, make_lease
):
    [host] = reservable_hosts(1, storage_free_bytes=25 * GIB)
    make_lease(at(8), at(10), with_disk(1, 20))

    with pytest.raises(LeaseRefused):
        make_lease(at(9), at(11), with_disk(1, 10))
    after = make_lease(at(10), at(12), with_disk(1, 10))

    assert allocations_of(after) == {host.name: 1}


def test_a_host_reporting_no_storage_pool_is_not_limited_by_disk(reservable_hosts, make_lease):
    [host] = reservable_hosts(1, storage_free_bytes=None)

    lease = make_lease(at(8), at(10), with_disk(3, 1000))

    assert allocations_of(lease) == {host.name: 3}
