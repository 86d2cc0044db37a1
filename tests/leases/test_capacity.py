"""Does a lease fit? The peak use over its window on the reservable hosts, affinity, host
properties, whole hosts against instances, and what the refusal says is short."""

import pytest

from leases.api.fields import parse_properties
from leases.capacity import DoesNotFit, plan
from leases.models import Allocation, Lease, LeaseStatus
from leases.services import LeaseRefused
from tests.leases.fixtures import PER_HOST, allocations_of, at, instances, whole_hosts

pytestmark = pytest.mark.django_db


def fits(start, end, *requests) -> bool:
    try:
        plan(start, end, [dict(r) for r in requests], lock=False)
    except DoesNotFit:
        return False
    return True


def shortage(start, end, *requests) -> str:
    with pytest.raises(DoesNotFit) as refused:
        plan(start, end, [dict(r) for r in requests], lock=False)
    return str(refused.value)


def planned_hosts(start, end, request) -> dict[int, tuple[int, bool]]:
    [(_, chosen)] = plan(start, end, [dict(request)], lock=False)
    return {host: (slots, whole) for host, slots, whole in chosen}


# -- time: the peak inside the window, not the sum --------------------------------------------


def test_a_lease_ending_when_another_starts_leaves_it_all_the_capacity(
    reservable_hosts, make_lease
):
    reservable_hosts(1)
    make_lease(at(8), at(10), instances(PER_HOST))

    later = make_lease(at(10), at(12), instances(PER_HOST))

    assert later.status == LeaseStatus.PENDING
    assert sum(allocations_of(later).values()) == PER_HOST


def test_a_lease_overlapping_by_one_minute_does_not_fit_beside_a_full_one(
    reservable_hosts, make_lease
):
    reservable_hosts(1)
    make_lease(at(8), at(10), instances(PER_HOST))

    assert not fits(at(9 + 59 / 60), at(12), instances(1))


def test_two_short_leases_at_different_times_count_by_their_peak_not_their_sum(
    reservable_hosts, make_lease
):
    reservable_hosts(1)
    make_lease(at(10), at(11), instances(2))
    make_lease(at(14), at(15), instances(2))

    # Over 9:00-16:00 at most 2 of the 3 slots are used at once: one more fits, two do not.
    assert fits(at(9), at(16), instances(1))
    assert shortage(at(9), at(16), instances(2)).startswith("only 1 of 2 instances fit")


def test_back_to_back_leases_inside_a_window_count_once(reservable_hosts, make_lease, make_cluster):
    reservable_hosts(1, cluster=make_cluster(memory_overcommit_percent=200))  # six slots
    make_lease(at(8), at(10), instances(PER_HOST))
    make_lease(at(10), at(12), instances(PER_HOST))

    assert fits(at(9), at(11), instances(PER_HOST))
    assert shortage(at(9), at(11), instances(PER_HOST + 1)).startswith("only 3 of 4")


def test_use_that_began_before_the_window_counts_inside_it(reservable_hosts, make_lease):
    reservable_hosts(1)
    make_lease(at(6), at(12), instances(2))

    assert shortage(at(10), at(14), instances(2)).startswith("only 1 of 2 instances fit")


def test_reservations_of_one_lease_count_each_other(reservable_hosts):
    reservable_hosts(1)

    message = shortage(at(9), at(10), instances(2), instances(2))

    assert message.startswith("reservation 2: only 1 of 2 instances fit")


# -- affinity --------------------------------------------------------------------------------


def test_affinity_true_puts_every_instance_on_one_host(reservable_hosts):
    reservable_hosts(2)

    chosen = planned_hosts(at(9), at(10), instances(PER_HOST, affinity=True))

    assert list(chosen.values()) == [(PER_HOST, False)]


def test_affinity_true_is_refused_when_no_single_host_has_room_for_all(reservable_hosts):
    reservable_hosts(2)  # room for 6 instances, but only 3 on any one host

    message = shortage(at(9), at(10), instances(PER_HOST + 1, affinity=True))

    assert message.startswith(f"only {PER_HOST} of {PER_HOST + 1} instances fit on one host")


def test_affinity_false_puts_each_instance_on_a_distinct_host(reservable_hosts):
    hosts = reservable_hosts(3)

    chosen = planned_hosts(at(9), at(10), instances(3, affinity=False))

    assert chosen == {host.pk: (1, False) for host in hosts}


def test_affinity_false_asking_for_more_instances_than_hosts_is_refused(reservable_hosts):
    reservable_hosts(3)

    message = shortage(at(9), at(10), instances(4, affinity=False))

    assert message.startswith("only 3 of 4 instances fit on distinct hosts")


def test_affinity_false_does_not_count_a_host_that_is_already_full(reservable_hosts, make_lease):
    reservable_hosts(3)
    make_lease(at(8), at(12), instances(PER_HOST, affinity=True))

    message = shortage(at(9), at(10), instances(3, affinity=False))

    assert message.startswith("only 2 of 3 instances fit on distinct hosts")


def test_affinity_null_spreads_the_instances_over_several_hosts(reservable_hosts):
    reservable_hosts(2)

    chosen = planned_hosts(at(9), at(10), instances(5))

    assert sorted(slots for slots, _ in chosen.values()) == [2, 3]


# -- host capacity and properties -------------------------------------------------------------


def test_memory_overcommit_of_the_cluster_raises_a_hosts_capacity(reservable_hosts, make_cluster):
    reservable_hosts(1, cluster=make_cluster(memory_overcommit_percent=200))

    assert fits(at(9), at(10), instances(2 * PER_HOST))
    assert not fits(at(9), at(10), instances(2 * PER_HOST + 1))


def test_vcpus_count_against_cpus_times_the_clusters_overcommit_ratio(
    reservable_hosts, make_cluster
):
    reservable_hosts(1, cluster=make_cluster(cpu_overcommit_ratio=1.0))

    assert fits(at(9), at(10), instances(2, vcpus=8, memory_mb=128))
    assert shortage(at(9), at(10), instances(3, vcpus=8, memory_mb=128)).startswith(
        "only 2 of 3 instances fit"
    )


def test_a_cpus_property_takes_only_hosts_with_at_least_that_many(reservable_hosts):
    reservable_hosts(1, cpus=16)
    [big] = reservable_hosts(1, cpus=32)

    chosen = planned_hosts(at(9), at(10), instances(1, cpus=32))

    assert list(chosen) == [big.pk]
    assert not fits(at(9), at(10), instances(1, cpus=33))


def test_a_memory_property_takes_only_hosts_with_at_least_that_much(reservable_hosts):
    reservable_hosts(1, memory_mb=3072)
    [big] = reservable_hosts(1, memory_mb=8192)

    chosen = planned_hosts(at(9), at(10), {**instances(1), "host_properties": {"memory_mb": 4096}})

    assert list(chosen) == [big.pk]
    assert not fits(at(9), at(10), {**instances(1), "host_properties": {"memory_mb": 8193}})


def test_a_capability_property_must_equal_the_hosts_capability(reservable_hosts):
    reservable_hosts(1, capabilities={"gpu": "t4"})
    [a100] = reservable_hosts(1, capabilities={"gpu": "a100", "ssd": True})

    assert list(planned_hosts(at(9), at(10), whole_hosts(1, gpu="a100"))) == [a100.pk]
    assert list(planned_hosts(at(9), at(10), whole_hosts(1, ssd=True))) == [a100.pk]
    assert shortage(at(9), at(10), whole_hosts(1, gpu="h100")).startswith(
        "only 0 of 1 hosts with those properties are free"
    )


def test_a_blazar_expression_selects_hosts_by_cpus_memory_and_capability(reservable_hosts):
    reservable_hosts(1, cpus=32, capabilities={"gpu": "t4"})
    reservable_hosts(1, cpus=8, capabilities={"gpu": "a100"})
    [wanted] = reservable_hosts(1, cpus=32, memory_mb=8192, capabilities={"gpu": "a100"})
    expression = (
        '["and", [">=", "$vcpus", "16"], [">=", "$memory_mb", "4096"], ["==", "$gpu", "a100"]]'
    )

    request = {**whole_hosts(1), "host_properties": parse_properties(expression, "field")}

    assert list(planned_hosts(at(9), at(10), request)) == [wanted.pk]


# -- whole hosts and instances on one free pool ----------------------------------------------


def test_whole_hosts_are_reserved_between_min_and_max(reservable_hosts):
    reservable_hosts(3)

    chosen = planned_hosts(at(9), at(10), whole_hosts(1, 2))

    assert list(chosen.values()) == [(0, True), (0, True)]
    assert shortage(at(9), at(10), whole_hosts(4)).startswith(
        "only 3 of 4 hosts with those properties are free"
    )


def test_a_whole_host_reservation_leaves_no_room_for_instances_on_that_host(
    reservable_hosts, make_lease
):
    reservable_hosts(2)
    make_lease(at(8), at(12), whole_hosts(1))

    # Only the other host's three slots remain in the window, before and after it all six.
    assert shortage(at(11), at(13), instances(PER_HOST + 1)).startswith(
        f"only {PER_HOST} of {PER_HOST + 1} instances fit"
    )
    assert fits(at(12), at(13), instances(2 * PER_HOST))


def test_a_host_holding_one_instance_cannot_be_reserved_whole(reservable_hosts, make_lease):
    [host] = reservable_hosts(1)
    make_lease(at(8), at(12), instances(1))

    assert shortage(at(11), at(13), whole_hosts(1)).startswith("only 0 of 1 hosts")
    assert list(planned_hosts(at(12), at(13), whole_hosts(1))) == [host.pk]


def test_whole_hosts_and_instances_in_one_lease_never_share_a_host(reservable_hosts):
    reservable_hosts(2)

    [(_, whole), (_, parts)] = plan(
        at(9), at(10), [whole_hosts(1), instances(PER_HOST)], lock=False
    )

    assert {host for host, _, _ in whole}.isdisjoint({host for host, _, _ in parts})
    assert shortage(at(9), at(10), whole_hosts(1), instances(PER_HOST + 1)).startswith(
        "reservation 2: only 3 of 4 instances fit"
    )


# -- hosts that never count -------------------------------------------------------------------


def test_hosts_that_are_not_reservable_never_count(reservable_hosts):
    reservable_hosts(2, reservable=False)

    assert shortage(at(9), at(10), instances(1)).startswith("only 0 of 1 instance fit")
    assert shortage(at(9), at(10), whole_hosts(1)).startswith("only 0 of 1 hosts")


@pytest.mark.parametrize("status", ["connecting", "maintenance", "non_responsive", "error"])
def test_reservable_hosts_that_are_not_up_never_count(reservable_hosts, status):
    reservable_hosts(1, status=status)

    assert shortage(at(9), at(10), instances(1)).startswith("only 0 of 1 instance fit")
    assert shortage(at(9), at(10), whole_hosts(1)).startswith("only 0 of 1 hosts")


def test_ended_leases_give_their_capacity_back(reservable_hosts, make_lease):
    reservable_hosts(1)
    lease = make_lease(at(8), at(12), instances(PER_HOST))
    assert not fits(at(9), at(10), instances(1))

    lease.status = LeaseStatus.TERMINATED
    lease.save(update_fields=["status"])

    assert fits(at(9), at(10), instances(PER_HOST))


def test_a_lease_excluded_from_the_plan_does_not_count_against_itself(reservable_hosts, make_lease):
    reservable_hosts(1)
    lease = make_lease(at(8), at(12), instances(PER_HOST))

    planned = plan(at(8), at(13), [instances(PER_HOST)], lock=False, exclude_lease=lease)

    assert sum(slots for _, chosen in planned for _, slots, _ in chosen) == PER_HOST


# -- the refusal -----------------------------------------------------------------------------


def test_the_refusal_says_how_many_of_the_instances_fit_and_when(reservable_hosts):
    reservable_hosts(1)

    message = shortage(at(9), at(17, day=1), instances(5))

    assert message == (
        f"only 3 of 5 instances fit between {at(9):%Y-%m-%d} 09:00 "
        f"and {at(17, day=1):%Y-%m-%d} 17:00 (5 instances of 1024 MiB need 5120 MiB free; "
        "3072 are free)"
    )


def test_a_refused_lease_stores_nothing(reservable_hosts, make_lease):
    reservable_hosts(1)

    with pytest.raises(LeaseRefused, match="only 3 of 5 instances fit"):
        make_lease(at(9), at(10), instances(5))

    assert not Lease.objects.exists()
    assert not Allocation.objects.exists()
