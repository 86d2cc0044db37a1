"""VMs running on a reservable host that no lease accounts for (ordinary VMs there when it joined
the free pool, a lease's VMs beyond what it holds on that host, those of an ended lease still
stopping) use its capacity for as long as they run: the planner never promises it to a lease."""

import pytest

from hosts import sync
from hosts.sync.reconcile import announce_stop
from leases import lifecycle, services
from leases.capacity import plan
from leases.models import Lease
from tests.leases.fixtures import PER_HOST, allocations_of, at, instances, whole_hosts

pytestmark = pytest.mark.django_db


@pytest.fixture
def shortage(make_lease):
    """shortage(start, end, *requests) -> why such a lease is refused."""

    def refusal(start, end, *requests) -> str:
        with pytest.raises(services.LeaseRefused) as refused:
            make_lease(start, end, *requests)
        return str(refused.value)

    return refusal


@pytest.fixture
def vm_on(make_vm):
    """vm_on(host, status="up", **fields) -> a VM of 1 vCPU and 1024 MiB on the host."""

    def make(host, status: str = "up", **fields):
        fields = {"vcpus": 1, "memory_mb": 1024, **fields}
        return make_vm(cluster=host.cluster, host=host, status=status, **fields)

    return make


def test_a_host_made_reservable_through_the_api_keeps_its_running_vms_room(
    make_host, vm_on, client_for, admin_user, make_lease, shortage
):
    host = make_host(status="up", cpus=16, memory_mb=3072)
    vm_on(host)
    vm_on(host, status="paused")
    vm_on(host, status="down")  # stopped: it holds nothing (and starts elsewhere)

    response = client_for(admin_user).patch(
        f"/api/hosts/{host.pk}/", {"reservable": True}, format="json"
    )

    assert response.status_code == 200
    assert make_lease(at(9), at(10), instances(1)).reservations.get().amount == 1
    assert shortage(at(9), at(10), instances(1)) == (
        f"The lease does not fit: only 0 of 1 instance fit between {at(9):%Y-%m-%d} 09:00 and "
        f"{at(10):%Y-%m-%d} 10:00 (1 instance of 1024 MiB needs 1024 MiB free; 0 are free). The "
        "earliest 1-hour window that fits starts "
        f"{at(10):%Y-%m-%d} 10:00 (UTC)."
    )


def test_a_vm_outside_leases_is_counted_with_no_end(reservable_hosts, vm_on, shortage):
    [host] = reservable_hosts(1)
    vm_on(host, memory_mb=2048)

    assert shortage(at(9, day=20), at(10, day=20), instances(2)) == (
        f"The lease does not fit: only 1 of 2 instances fit between {at(9, day=20):%Y-%m-%d} "
        f"09:00 and {at(10, day=20):%Y-%m-%d} 10:00 (2 instances of 1024 MiB need 2048 MiB "
        "free; 1024 are free). No 1-hour window that starts in the 30 days after "
        f"{at(9, day=20):%Y-%m-%d} 09:00 (UTC) fits."
    )


def test_a_whole_host_is_not_free_while_a_vm_outside_leases_runs_there(
    reservable_hosts, vm_on, shortage
):
    first, second = reservable_hosts(2)
    vm_on(first, status="unknown")  # its host was not heard from: it may well run

    assert allocations_of_plan(whole_hosts(1)) == [second.pk]
    assert shortage(at(9), at(10), whole_hosts(2)) == (
        f"The lease does not fit: only 1 of 2 hosts with those properties are free between "
        f"{at(9):%Y-%m-%d} 09:00 and {at(10):%Y-%m-%d} 10:00 (2 reservable hosts are up; 1 of "
        "them holds other reservations or VMs then). No 1-hour window that starts in the 30 "
        f"days after {at(9):%Y-%m-%d} 09:00 (UTC) fits."
    )


def allocations_of_plan(request) -> list[int]:
    [(_, chosen)] = plan(at(9), at(10), [request], lock=False)
    return [host for host, _, _ in chosen]


def test_a_leases_own_vms_are_not_counted_twice(reservable_hosts, make_lease, vm_on):
    [host] = reservable_hosts(1)
    lease = make_lease(at(-48), at(10), instances(2))
    lifecycle.start_lease(lease)
    reservation = lease.reservations.get()
    for _ in range(2):
        vm_on(host, reservation=reservation)

    other = make_lease(at(9), at(10), instances(PER_HOST - 2))

    assert allocations_of(other) == {host.name: 1}


def test_a_leases_vms_beyond_what_it_holds_on_a_host_are_counted(
    reservable_hosts, make_lease, vm_on, shortage
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(-48), at(10), instances(1))
    lifecycle.start_lease(lease)
    assert allocations_of(lease) == {first.name: 1}
    # Its VM runs on the second host, which it holds nothing on (its capacity moved while that
    # host was away, say).
    vm_on(second, reservation=lease.reservations.get())

    other = make_lease(at(9), at(10), instances(2 * PER_HOST - 2))

    assert allocations_of(other) == {first.name: PER_HOST - 1, second.name: PER_HOST - 1}
    assert "only 0 of 1" in shortage(at(9), at(10), instances(1))


def test_the_vms_of_an_ended_lease_count_until_they_stop(
    reservable_hosts, make_lease, vm_on, shortage
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(-48), at(10), instances(PER_HOST))
    lifecycle.start_lease(lease)
    vms = [vm_on(host, reservation=lease.reservations.get()) for _ in range(PER_HOST)]
    lifecycle.end_lease(lease)  # their power-off jobs are queued, not done

    assert "only 0 of 1" in shortage(at(11), at(12), instances(1))

    for vm in vms:
        vm.status = "down"
        vm.save(update_fields=["status"])
    assert make_lease(at(11), at(12), instances(PER_HOST)).reservations.get().amount == PER_HOST


def test_a_vm_migrating_to_a_reservable_host_counts_there(
    reservable_hosts, make_host, vm_on, shortage
):
    [host] = reservable_hosts(1)
    elsewhere = make_host(cluster=host.cluster, status="up", cpus=16, memory_mb=3072)
    vm_on(elsewhere, status="migrating", migrating_to=host, memory_mb=3072)

    assert "only 0 of 1" in shortage(at(9), at(10), instances(1))


def test_a_vm_outside_leases_stopping_makes_a_degraded_lease_whole(
    reservable_hosts, make_lease, vm_on, django_capture_on_commit_callbacks
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    outside = vm_on(second, memory_mb=2048)  # leaves the second host one slot
    with django_capture_on_commit_callbacks(execute=True):
        sync.mark_unreachable(first.pk, "connection refused")
    assert Lease.objects.get(pk=lease.pk).degraded

    outside.status = "down"
    outside.save(update_fields=["status"])
    with django_capture_on_commit_callbacks(execute=True):
        announce_stop(outside.pk)  # what the sync and a stop job tell the apps above

    assert allocations_of(lease) == {second.name: 2}
    assert not Lease.objects.get(pk=lease.pk).degraded
