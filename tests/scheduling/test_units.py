"""Each built-in policy unit, through the scheduler: which hosts it removes and why, or how it
orders them. Hosts and VMs are rows (no libvirt); each policy holds just the unit under test."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host
from scheduling.models import AffinityGroup
from scheduling.scheduler import NoHostAvailable, schedule


def removed_by(explanation: dict, unit: str) -> dict:
    """{host name: reason} for the hosts ``unit`` removed (empty if it removed none)."""
    for step in explanation["filters"]:
        if step["unit"] == unit:
            return step["removed"]
    return {}


def order(decision) -> list[str]:
    return [host.name for host in decision.hosts]


@pytest.fixture
def only(make_policy, cluster_with):
    """only(filter=..., weight=..., hosts=2, properties=None, **cluster_fields) -> (cluster,
    hosts) whose policy holds just that unit."""

    def make(*, filter=None, weight=None, hosts=2, properties=None, **fields):  # noqa: A002
        policy = make_policy(
            filters=[filter] if filter else [],
            weights=[weight] if weight else [],
            properties=properties,
        )
        return cluster_with(hosts=hosts, policy=policy, **fields)

    return make


# -- HostStatus ----------------------------------------------------------------------------------


def test_host_status_keeps_only_hosts_that_are_up(only, vm_in):
    cluster, (h1, h2, h3) = only(filter="HostStatus", hosts=3)
    Host.objects.filter(pk=h1.pk).update(status="maintenance")
    Host.objects.filter(pk=h2.pk).update(status="non_responsive")

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h3"]
    assert removed_by(decision.explanation, "HostStatus") == {
        "h1": "host is maintenance",
        "h2": "host is non_responsive",
    }


# -- Memory --------------------------------------------------------------------------------------


def test_memory_removes_hosts_without_room_for_the_vm(only, vm_in, vm_on):
    cluster, (h1, h2) = only(filter="Memory")
    vm_on(h1, memory_mb=2560)

    decision = schedule(vm_in(cluster, memory_mb=1024))

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "Memory") == {"h1": "512 MiB free, 1024 MiB needed"}


def test_memory_counts_starting_vms_as_promised_to_their_host(only, vm_in, vm_on):
    cluster, (h1, h2) = only(filter="Memory")
    vm_on(h1, status="starting", memory_mb=2560)

    decision = schedule(vm_in(cluster, memory_mb=1024))

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "Memory") == {"h1": "512 MiB free, 1024 MiB needed"}


def test_memory_counts_a_vm_migrating_to_a_host_there_too(only, vm_in, vm_on):
    cluster, (h1, h2, h3) = only(filter="Memory", hosts=3)
    vm_on(h3, memory_mb=2560, status="migrating", migrating_to=h1)

    decision = schedule(vm_in(cluster, memory_mb=1024))

    assert order(decision) == ["h2"]
    assert set(removed_by(decision.explanation, "Memory")) == {"h1", "h3"}


def test_memory_of_stopped_vms_is_free(only, vm_in, vm_on):
    cluster, (h1,) = only(filter="Memory", hosts=1)
    vm_on(h1, status="down", memory_mb=3072)

    decision = schedule(vm_in(cluster, memory_mb=1024))

    assert order(decision) == ["h1"]


@pytest.mark.parametrize(("overcommit", "fits"), [(100, False), (150, True)])
def test_memory_overcommit_lets_a_host_promise_more_than_it_has(
    only, vm_in, vm_on, overcommit, fits
):
    cluster, (h1,) = only(filter="Memory", hosts=1, memory_overcommit_percent=overcommit)
    vm_on(h1, memory_mb=3072)
    vm = vm_in(cluster, memory_mb=1024)

    if fits:
        assert order(schedule(vm)) == ["h1"]
    else:
        with pytest.raises(NoHostAvailable, match="h1: 0 MiB free, 1024 MiB needed"):
            schedule(vm)


# -- CPU -----------------------------------------------------------------------------------------


def test_cpu_removes_hosts_with_fewer_cpus_than_the_vm_has_vcpus(only, vm_in):
    cluster, (h1, h2) = only(filter="CPU")
    Host.objects.filter(pk=h1.pk).update(cpus=4)

    decision = schedule(vm_in(cluster, vcpus=8))

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "CPU") == {"h1": "4 CPUs, the VM has 8 vCPUs"}


@pytest.mark.parametrize(("ratio", "fits"), [(1.0, False), (2.0, True)])
def test_cpu_keeps_given_vcpus_under_the_overcommit_ratio(only, vm_in, vm_on, ratio, fits):
    cluster, (h1,) = only(filter="CPU", hosts=1, cpu_overcommit_ratio=ratio)
    vm_on(h1, vcpus=16)
    vm = vm_in(cluster, vcpus=1)

    if fits:
        assert order(schedule(vm)) == ["h1"]
    else:
        with pytest.raises(NoHostAvailable, match=r"h1: 16 of 16 vCPUs given \(CPU\)"):
            schedule(vm)


def test_cpu_counts_a_fractional_ratio_as_the_leases_and_the_console_do(only, vm_in, vm_on):
    # 25 CPUs x 4.6 is 114.99999999999999 in floating point; the host holds 115 vCPUs.
    cluster, (h1,) = only(filter="CPU", hosts=1, cpu_overcommit_ratio=4.6)
    Host.objects.filter(pk=h1.pk).update(cpus=25)
    vm_on(h1, vcpus=114)

    assert order(schedule(vm_in(cluster, vcpus=1))) == ["h1"]


# -- PinToHost -----------------------------------------------------------------------------------


def test_pin_to_host_keeps_only_the_pinned_host(only, vm_in):
    cluster, (h1, h2, h3) = only(filter="PinToHost", hosts=3)

    decision = schedule(vm_in(cluster, pinned_host=h2))

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "PinToHost") == {
        "h1": "the VM is pinned to another host",
        "h3": "the VM is pinned to another host",
    }


def test_pin_to_host_removes_nothing_for_an_unpinned_vm(only, vm_in):
    cluster, _ = only(filter="PinToHost", hosts=3)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2", "h3"]
    assert removed_by(decision.explanation, "PinToHost") == {}


# -- Network -------------------------------------------------------------------------------------


def test_network_removes_hosts_lacking_a_network_of_the_template(only, vm_in, make_template):
    cluster, (h1, h2) = only(filter="Network")
    Host.objects.filter(pk=h2.pk).update(reported_networks=["default", "storage"])
    template = make_template(memory_mb=128, networks=["default", "storage"])

    decision = schedule(vm_in(cluster, template=template))

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "Network") == {"h1": "lacks network storage"}


def test_network_needs_nothing_for_a_template_without_networks(only, vm_in):
    cluster, (h1, h2) = only(filter="Network")
    Host.objects.filter(pk=h1.pk).update(reported_networks=[])

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]


# -- Migration -----------------------------------------------------------------------------------


def test_migration_excludes_the_host_the_vm_runs_on(only, vm_on):
    cluster, (h1, h2) = only(filter="Migration")
    vm = vm_on(h1)

    decision = schedule(vm, purpose="migrate")

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "Migration") == {"h1": "the VM runs here already"}


def test_migration_does_not_exclude_the_host_of_a_vm_being_started(only, vm_on):
    cluster, (h1, h2) = only(filter="Migration")
    vm = vm_on(h1, status="down")

    decision = schedule(vm, purpose="start")

    assert order(decision) == ["h1", "h2"]


# -- CPUOverloaded -------------------------------------------------------------------------------

OVERLOAD = {"HighUtilization": 80, "CpuOverCommitDurationMinutes": 2}


def _overloaded(host, *, since_minutes: float, measured: float | None = 95.0) -> None:
    Host.objects.filter(pk=host.pk).update(
        cpu_usage_percent=measured,
        overloaded_since=timezone.now() - timedelta(minutes=since_minutes),
    )


def test_cpu_overloaded_removes_a_host_over_the_threshold_for_the_duration(only, vm_in):
    cluster, (h1, h2) = only(filter="CPUOverloaded", properties=OVERLOAD)
    _overloaded(h1, since_minutes=10)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "CPUOverloaded") == {"h1": "CPU load 95% over 80%"}


def test_cpu_overloaded_keeps_a_host_over_the_threshold_for_less_than_the_duration(only, vm_in):
    cluster, (h1, h2) = only(filter="CPUOverloaded", properties=OVERLOAD)
    _overloaded(h1, since_minutes=0.5)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]


def test_cpu_overloaded_keeps_a_host_back_under_the_threshold(only, vm_in):
    cluster, (h1, h2) = only(filter="CPUOverloaded", properties=OVERLOAD)
    _overloaded(h1, since_minutes=10, measured=50.0)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]


def test_cpu_overloaded_reads_the_load_from_given_vcpus_without_a_measurement(only, vm_in, vm_on):
    cluster, (h1, h2) = only(filter="CPUOverloaded", properties=OVERLOAD)
    vm_on(h1, vcpus=14)
    _overloaded(h1, since_minutes=10, measured=None)

    decision = schedule(vm_in(cluster))

    assert removed_by(decision.explanation, "CPUOverloaded") == {"h1": "CPU load 88% over 80%"}


def test_cpu_overloaded_follows_the_clusters_high_utilization(only, vm_in):
    cluster, (h1, h2) = only(
        filter="CPUOverloaded", properties=OVERLOAD, policy_properties={"HighUtilization": 96}
    )
    _overloaded(h1, since_minutes=10)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]


# -- Reservation ---------------------------------------------------------------------------------


def test_reservation_keeps_ordinary_vms_off_reservable_hosts(only, vm_in):
    cluster, (h1, h2) = only(filter="Reservation")
    Host.objects.filter(pk=h1.pk).update(reservable=True)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "Reservation") == {"h1": "reserved for leases"}


# -- VmAffinityGroups ----------------------------------------------------------------------------


def _group(cluster, *vms, rule="negative", enforcing=True) -> AffinityGroup:
    group = AffinityGroup.objects.create(
        cluster=cluster, name="apart", vm_rule=rule, vm_enforcing=enforcing
    )
    group.vms.set(vms)
    return group


def test_vm_affinity_filter_removes_hosts_breaking_an_enforcing_group(only, vm_in, vm_on):
    cluster, (h1, h2) = only(filter="VmAffinityGroups")
    vm = vm_in(cluster)
    _group(cluster, vm, vm_on(h1))

    decision = schedule(vm)

    assert order(decision) == ["h2"]
    assert removed_by(decision.explanation, "VmAffinityGroups") == {
        "h1": "affinity group apart: another of its VMs runs here"
    }


def test_vm_affinity_filter_ignores_soft_groups(only, vm_in, vm_on):
    cluster, (h1, h2) = only(filter="VmAffinityGroups")
    vm = vm_in(cluster)
    _group(cluster, vm, vm_on(h1), enforcing=False)

    decision = schedule(vm)

    assert order(decision) == ["h1", "h2"]


def test_vm_affinity_weight_scores_each_group_a_host_would_break(only, vm_in, vm_on):
    cluster, (h1, h2) = only(weight="VmAffinityGroups")
    vm = vm_in(cluster)
    _group(cluster, vm, vm_on(h1), enforcing=False)

    decision = schedule(vm)

    assert order(decision) == ["h2", "h1"]
    scores = decision.explanation["scores"]
    assert scores["h1"]["units"]["VmAffinityGroups"]["score"] == 1.0
    assert scores["h2"]["units"]["VmAffinityGroups"]["score"] == 0.0


# -- weights -------------------------------------------------------------------------------------


def _scores(decision, unit: str) -> dict[str, float]:
    return {
        name: row["units"][unit]["score"] for name, row in decision.explanation["scores"].items()
    }


def test_even_cpu_distribution_prefers_the_host_with_the_lowest_cpu_load(only, vm_in, vm_on):
    cluster, (h1, h2, h3) = only(weight="OptimalForEvenDistribution", hosts=3)
    vm_on(h1, vcpus=8)
    vm_on(h2, vcpus=4)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h3", "h2", "h1"]
    assert _scores(decision, "OptimalForEvenDistribution") == {"h1": 50.0, "h2": 25.0, "h3": 0.0}


def test_even_cpu_distribution_uses_the_measured_load_where_a_host_reports_it(only, vm_in, vm_on):
    cluster, (h1, h2) = only(weight="OptimalForEvenDistribution")
    vm_on(h1, vcpus=8)
    Host.objects.filter(pk=h1.pk).update(cpu_usage_percent=5.0)
    Host.objects.filter(pk=h2.pk).update(cpu_usage_percent=60.0)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]


def test_even_memory_distribution_prefers_the_host_with_the_most_free_memory(only, vm_in, vm_on):
    cluster, (h1, h2, h3) = only(weight="OptimalForEvenMemoryDistribution", hosts=3)
    vm_on(h1, memory_mb=1024)
    vm_on(h3, memory_mb=512)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h2", "h3", "h1"]


def test_power_saving_cpu_prefers_the_busiest_host_still_under_high_utilization(only, vm_in, vm_on):
    cluster, (h1, h2, h3) = only(
        weight="OptimalForPowerSaving", hosts=3, properties={"HighUtilization": 80}
    )
    vm_on(h1, vcpus=8)
    vm_on(h3, vcpus=15)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2", "h3"]


def test_power_saving_memory_prefers_the_host_with_the_least_free_memory(only, vm_in, vm_on):
    cluster, (h1, h2, h3) = only(weight="OptimalForPowerSavingMemory", hosts=3)
    vm_on(h1, memory_mb=1024)
    vm_on(h3, memory_mb=512)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h3", "h2"]


def test_even_guest_distribution_prefers_the_host_running_the_fewest_vms(only, vm_in, vm_on):
    cluster, (h1, h2, h3) = only(weight="OptimalForEvenGuestDistribution", hosts=3)
    for _ in range(3):
        vm_on(h1)
    vm_on(h2)
    vm_on(h2, status="down")

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h3", "h2", "h1"]
    assert _scores(decision, "OptimalForEvenGuestDistribution") == {
        "h1": 3.0,
        "h2": 1.0,
        "h3": 0.0,
    }
