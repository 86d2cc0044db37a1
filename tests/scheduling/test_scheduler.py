"""The scheduler: filters in a chain, weights combined by rank and factor, the explanation,
user-written units, broken units; and a start job that records why it chose its host."""

import pytest

from hosts import jobs
from hosts.models import Host, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from scheduling import registry
from scheduling.models import Policy, PolicyUnit, PolicyWeight
from scheduling.scheduler import NoHostAvailable, schedule

USER_UNITS = [
    "tests.scheduling.user_units.PreferNamedHost",
    "tests.scheduling.user_units.AvoidNamedHost",
    "tests.scheduling.user_units.BrokenFilter",
    "tests.scheduling.user_units.BrokenWeight",
    "tests.scheduling.user_units.ScoresAsList",
    "tests.scheduling.user_units.ScoresNothing",
]


def order(decision) -> list[str]:
    return [host.name for host in decision.hosts]


@pytest.fixture
def user_units(db, settings):
    """Register the user-written units of tests/scheduling/user_units.py (plus ``extra``)."""

    def register(*extra: str) -> None:
        settings.CORRAL_SCHEDULING_UNITS = [*USER_UNITS, *extra]
        registry.sync_units()

    return register


# -- filters ---------------------------------------------------------------------------------


def test_filters_run_by_position_each_seeing_only_the_hosts_left(
    make_policy, cluster_with, vm_in, vm_on, make_template
):
    policy = make_policy(
        filters=[("Memory", "last"), ("Network", "no_order"), ("HostStatus", "first")]
    )
    cluster, (h1, h2, h3, h4) = cluster_with(hosts=4, policy=policy)
    Host.objects.filter(pk=h1.pk).update(status="maintenance")
    Host.objects.filter(pk__in=[h3.pk, h4.pk]).update(reported_networks=["default", "storage"])
    vm_on(h1, memory_mb=3072)  # h1 would fail Network and Memory too
    vm_on(h3, memory_mb=3072)
    vm = vm_in(cluster, template=make_template(memory_mb=128, networks=["storage"]))

    decision = schedule(vm)

    assert order(decision) == ["h4"]
    assert decision.explanation["filters"] == [
        {"unit": "HostStatus", "removed": {"h1": "host is maintenance"}},
        {"unit": "Network", "removed": {"h2": "lacks network storage"}},
        {"unit": "Memory", "removed": {"h3": "0 MiB free, 128 MiB needed"}},
    ]


def test_no_host_available_names_each_host_and_the_filter_that_removed_it(
    cluster_with, vm_in, vm_on
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    Host.objects.filter(pk=h1.pk).update(status="maintenance")
    vm_on(h2, memory_mb=3072)
    vm = vm_in(cluster, name="web-1")

    with pytest.raises(NoHostAvailable) as raised:
        schedule(vm)

    assert raised.value.message == (
        f"No host can run web-1 in cluster {cluster.name}: "
        "h1: host is maintenance (HostStatus); h2: 0 MiB free, 128 MiB needed (Memory)."
    )
    assert raised.value.explanation["filters"] == [
        {"unit": "HostStatus", "removed": {"h1": "host is maintenance"}},
        {"unit": "Memory", "removed": {"h2": "0 MiB free, 128 MiB needed"}},
    ]
    assert raised.value.explanation["order"] == []


def test_a_cluster_without_hosts_has_no_host_for_a_vm(make_cluster, vm_in):
    cluster = make_cluster()

    with pytest.raises(NoHostAvailable, match="it has no hosts"):
        schedule(vm_in(cluster))


def test_a_cluster_without_a_policy_uses_the_default_policy(cluster_with, vm_in):
    cluster, _ = cluster_with(hosts=1)

    decision = schedule(vm_in(cluster))

    assert decision.explanation["policy"] == Policy.objects.get(is_default=True).name == "none"


def test_a_cluster_with_a_policy_uses_it(cluster_with, vm_in):
    cluster, _ = cluster_with(hosts=1, policy="vm_evenly_distributed")

    decision = schedule(vm_in(cluster))

    assert decision.explanation["policy"] == "vm_evenly_distributed"


# -- weights ---------------------------------------------------------------------------------


@pytest.fixture
def cpu_versus_memory(make_policy, cluster_with, vm_on):
    """Two hosts the CPU and memory weights disagree on: h1 has more vCPUs given (CPU prefers
    h2), h2 less free memory (memory prefers h1)."""

    def make(cpu_factor: int, memory_factor: int):
        policy = make_policy(
            filters=["HostStatus", "Memory", "CPU"],
            weights=[
                ("OptimalForEvenDistribution", cpu_factor),
                ("OptimalForEvenMemoryDistribution", memory_factor),
            ],
        )
        cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)
        vm_on(h1, vcpus=8, memory_mb=128)
        vm_on(h2, vcpus=1, memory_mb=2048)
        return cluster

    return make


@pytest.mark.parametrize(
    ("cpu_factor", "memory_factor", "chosen"), [(2, 1, "h2"), (1, 2, "h1"), (1, 1, "h1")]
)
def test_the_weight_with_the_larger_factor_decides_when_weights_disagree(
    cpu_versus_memory, vm_in, cpu_factor, memory_factor, chosen
):
    cluster = cpu_versus_memory(cpu_factor, memory_factor)

    decision = schedule(vm_in(cluster))

    assert decision.host.name == chosen


def test_weights_add_up_ranks_not_raw_scores(make_policy, cluster_with, vm_on, vm_in):
    # By raw scores, h1's 3056 MiB free would swamp every CPU percentage; by rank, h2 is
    # second in memory and first in CPU, which is best overall.
    policy = make_policy(weights=["OptimalForEvenDistribution", "OptimalForEvenMemoryDistribution"])
    cluster, (h1, h2, h3) = cluster_with(hosts=3, policy=policy)
    vm_on(h1, vcpus=8, memory_mb=16)
    vm_on(h2, vcpus=1, memory_mb=128)
    vm_on(h3, vcpus=4, memory_mb=1024)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h2", "h1", "h3"]
    totals = {name: row["total"] for name, row in decision.explanation["scores"].items()}
    assert totals == {"h1": 2, "h2": 1, "h3": 3}


def test_hosts_with_equal_scores_share_a_rank_and_the_lower_id_wins(
    make_policy, cluster_with, vm_on, vm_in
):
    policy = make_policy(weights=["OptimalForEvenMemoryDistribution"])
    cluster, (h1, h2, h3) = cluster_with(hosts=3, policy=policy)
    vm_on(h1, memory_mb=512)

    decision = schedule(vm_in(cluster))

    ranks = {
        name: row["units"]["OptimalForEvenMemoryDistribution"]["rank"]
        for name, row in decision.explanation["scores"].items()
    }
    assert ranks == {"h1": 1, "h2": 0, "h3": 0}
    assert order(decision) == ["h2", "h3", "h1"]


def test_the_explanation_lists_each_hosts_scores_ranks_factors_and_total(cpu_versus_memory, vm_in):
    cluster = cpu_versus_memory(cpu_factor=3, memory_factor=1)

    explanation = schedule(vm_in(cluster)).explanation

    assert explanation["policy"] == cluster.policy.name
    assert explanation["order"] == ["h2", "h1"]
    assert explanation["skipped_units"] == []
    assert explanation["scores"] == {
        "h1": {
            "units": {
                "OptimalForEvenDistribution": {"score": 50.0, "rank": 1, "factor": 3},
                "OptimalForEvenMemoryDistribution": {"score": -2944.0, "rank": 0, "factor": 1},
            },
            "total": 3,
        },
        "h2": {
            "units": {
                "OptimalForEvenDistribution": {"score": 6.25, "rank": 0, "factor": 3},
                "OptimalForEvenMemoryDistribution": {"score": -1024.0, "rank": 1, "factor": 1},
            },
            "total": 1,
        },
    }


def test_schedule_reads_the_cluster_in_a_constant_number_of_queries(
    cluster_with, vm_in, vm_on, add_hosts, django_assert_max_num_queries
):
    cluster, hosts = cluster_with(hosts=3, policy="evenly_distributed")
    vm_on(hosts[0])
    vm = vm_in(cluster)
    with django_assert_max_num_queries(12) as few:
        schedule(vm)
    add_hosts(cluster, 20)
    for host in Host.objects.filter(cluster=cluster):
        vm_on(host)

    with django_assert_max_num_queries(len(few.captured_queries)):
        schedule(vm)


# -- user-written units ----------------------------------------------------------------------


def test_a_user_written_unit_is_registered_as_a_non_internal_policy_unit(user_units):
    user_units()

    unit = PolicyUnit.objects.get(name="PreferNamedHost")

    assert (unit.internal, unit.kinds, unit.error) == (False, ["weight"], "")
    assert unit.implementation == "tests.scheduling.user_units.PreferNamedHost"
    assert unit.properties["PreferredHost"]["regex"] == r"[A-Za-z0-9._-]*"
    assert PolicyUnit.objects.get(name="AvoidNamedHost").kinds == ["filter"]


def test_a_user_written_weight_in_a_cloned_policy_changes_the_choice(
    user_units, admin_user, client_for, cluster_with, vm_in
):
    user_units()
    client = client_for(admin_user)
    cluster, (h1, h2) = cluster_with(hosts=2)
    vm = vm_in(cluster)
    assert schedule(vm).host == h1
    none = Policy.objects.get(name="none")
    copy = client.post(f"/api/schedulingpolicies/{none.pk}/clone/", {"name": "site"}).json()

    added = client.post(
        f"/api/schedulingpolicies/{copy['id']}/weights/", {"unit": "PreferNamedHost", "factor": 5}
    )
    changed = client.patch(
        f"/api/schedulingpolicies/{copy['id']}/", {"properties": {"PreferredHost": "h2"}}
    )
    chosen = client.patch(f"/api/clusters/{cluster.pk}/", {"policy": copy["id"]})

    assert (added.status_code, changed.status_code, chosen.status_code) == (201, 200, 200)
    decision = schedule(VirtualMachine.objects.get(pk=vm.pk))
    assert decision.host == h2
    assert decision.explanation["scores"]["h2"]["units"]["PreferNamedHost"] == {
        "score": 0.0,
        "rank": 0,
        "factor": 5,
    }


def test_a_user_written_filter_removes_hosts_with_its_own_reason(
    user_units, make_policy, cluster_with, vm_in
):
    user_units()
    policy = make_policy(filters=["HostStatus", "AvoidNamedHost"], properties={})
    cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)
    cluster.policy_properties = {"AvoidedHost": "h1"}
    cluster.save()

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h2"]
    assert decision.explanation["filters"] == [
        {"unit": "AvoidNamedHost", "removed": {"h1": "avoided by the site"}}
    ]


def test_a_unit_that_raises_is_reported_and_skipped(user_units, make_policy, cluster_with, vm_in):
    user_units()
    policy = make_policy(
        filters=["HostStatus", "BrokenFilter"],
        weights=["BrokenWeight", "OptimalForEvenMemoryDistribution"],
    )
    cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]
    assert decision.explanation["skipped_units"] == [
        {
            "unit": "BrokenFilter",
            "error": "the inventory database is down",
            "outcome": "every host kept",
        },
        {"unit": "BrokenWeight", "error": "division by zero", "outcome": "neutral"},
    ]
    assert "BrokenWeight" not in decision.explanation["scores"]["h1"]["units"]


@pytest.mark.parametrize(
    ("unit", "error"),
    [
        ("ScoresAsList", "score() returned list, not a dict"),
        ("ScoresNothing", "score() returned NoneType for a host, not a number"),
    ],
)
def test_a_unit_answering_in_the_wrong_shape_is_reported_and_skipped(
    user_units, make_policy, cluster_with, vm_in, vm_on, unit, error
):
    user_units()
    policy = make_policy(weights=[unit, "OptimalForEvenMemoryDistribution"])
    cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)
    vm_on(h1)

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h2", "h1"]
    assert decision.explanation["skipped_units"] == [
        {"unit": unit, "error": error, "outcome": "neutral"}
    ]


def test_a_unit_whose_path_does_not_import_is_recorded_with_its_error(user_units):
    user_units("tests.scheduling.no_such_module.GhostUnit")

    unit = PolicyUnit.objects.get(name="GhostUnit")

    assert unit.internal is False
    assert "No module named 'tests.scheduling.no_such_module'" in unit.error
    assert unit.kinds == []


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("tests.scheduling.user_units.NotAUnit", "not a PolicyUnitBase subclass"),
        ("tests.scheduling.user_units.DoesNothing", "implements none of filter, score, balance"),
        ("tests.scheduling.user_units.Missing", 'does not define a "Missing"'),
    ],
)
def test_a_path_that_is_not_a_usable_unit_is_recorded_with_why(user_units, path, error):
    user_units(path)

    unit = PolicyUnit.objects.get(name=path.rsplit(".", 1)[1])

    assert error in unit.error


def test_a_unit_whose_module_went_away_is_skipped_with_its_error(
    user_units, settings, make_policy, cluster_with, vm_in
):
    user_units()
    policy = make_policy(filters=["HostStatus"], weights=["PreferNamedHost"])
    cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)
    settings.CORRAL_SCHEDULING_UNITS = ["tests.scheduling.moved_away.PreferNamedHost"]
    registry.sync_units()

    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]
    (skipped,) = decision.explanation["skipped_units"]
    assert skipped["unit"] == "PreferNamedHost"
    assert "moved_away" in skipped["error"]


def test_a_disabled_unit_is_not_run(user_units, make_policy, cluster_with, vm_in):
    user_units()
    policy = make_policy(filters=["HostStatus", "BrokenFilter"])
    cluster, _ = cluster_with(hosts=2, policy=policy)
    PolicyUnit.objects.filter(name="BrokenFilter").update(enabled=False)

    decision = schedule(vm_in(cluster))

    assert decision.explanation["skipped_units"] == []


def test_factors_of_user_written_weights_are_kept_when_their_policy_is_cloned(
    user_units, admin_user, client_for, make_policy
):
    user_units()
    policy = make_policy(weights=[("PreferNamedHost", 7)])

    copy = client_for(admin_user).post(
        f"/api/schedulingpolicies/{policy.pk}/clone/", {"name": "copy-of-site"}
    )

    assert copy.status_code == 201
    assert copy.json()["weights"][0]["unit"] == "PreferNamedHost"
    assert PolicyWeight.objects.get(policy_id=copy.json()["id"]).factor == 7


# -- start jobs on simulated hosts -------------------------------------------------------------


def test_a_start_job_shows_why_it_chose_its_host(sim_cluster, vm_in, vm_on, admin_user, client_for):
    cluster, (sim1, sim2, sim3) = sim_cluster()
    Host.objects.filter(pk=sim1.pk).update(status="maintenance")
    vm_on(sim2, memory_mb=1024)
    vm = vm_in(cluster)
    client = client_for(admin_user)

    queued = client.post(f"/api/vms/{vm.pk}/start/")
    jobs.run(queued.json()["id"], OPERATION_BY_KIND)
    job = client.get(f"/api/jobs/{queued.json()['id']}/").json()

    assert (job["state"], job["result"]["host"]) == ("succeeded", "sim-3")
    placement = job["result"]["placement"]
    assert placement["policy"] == "none"
    assert placement["order"] == ["sim-3", "sim-2"]
    assert placement["filters"] == [
        {"unit": "HostStatus", "removed": {"sim-1": "host is maintenance"}}
    ]
    assert placement["scores"]["sim-2"]["units"]["OptimalForEvenMemoryDistribution"]["rank"] == 1
    assert any(line["message"].startswith("Placed on sim-3") for line in job["journal"])
    assert VirtualMachine.objects.get(pk=vm.pk).host_id == sim3.pk


def test_a_start_with_no_host_that_fits_fails_with_no_host_and_the_reasons(
    sim_cluster, vm_in, admin_user, client_for
):
    cluster, hosts = sim_cluster()
    vm = vm_in(cluster, memory_mb=4096, name="too-big")
    client = client_for(admin_user)
    job = jobs.submit(JobKind.START, vm=vm)

    jobs.run(job.pk, OPERATION_BY_KIND)
    shown = client.get(f"/api/jobs/{job.pk}/").json()

    assert shown["state"] == "failed"
    assert shown["error"]["code"] == "no_host"
    assert shown["error"]["message"] == (
        f"No host can run too-big in cluster {cluster.name}: "
        "sim-1: 3072 MiB free, 4096 MiB needed (Memory); "
        "sim-2: 3072 MiB free, 4096 MiB needed (Memory); "
        "sim-3: 3072 MiB free, 4096 MiB needed (Memory)."
    )
    assert shown["result"]["placement"]["filters"][0]["unit"] == "Memory"
    vm.refresh_from_db()
    assert (vm.status, vm.host_id) == ("down", None)


# -- disabled units --------------------------------------------------------------------------


def test_a_filter_disabled_through_the_api_is_skipped_and_named_in_the_explanation(
    user_units, make_policy, cluster_with, vm_in, admin_user, client_for
):
    user_units()
    policy = make_policy(filters=["HostStatus", "AvoidNamedHost"], properties={})
    cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)
    cluster.policy_properties = {"AvoidedHost": "h1"}
    cluster.save()
    unit = PolicyUnit.objects.get(name="AvoidNamedHost")
    assert order(schedule(vm_in(cluster))) == ["h2"]

    response = client_for(admin_user).patch(
        f"/api/schedulingpolicyunits/{unit.pk}/", {"enabled": False}, format="json"
    )
    decision = schedule(vm_in(cluster))

    assert (response.status_code, response.json()["enabled"]) == (200, False)
    assert order(decision) == ["h1", "h2"]
    assert decision.explanation["filters"] == []
    assert decision.explanation["disabled_units"] == ["AvoidNamedHost"]


def test_a_weight_disabled_through_the_api_no_longer_orders_the_hosts(
    user_units, make_policy, cluster_with, vm_in, admin_user, client_for
):
    user_units()
    policy = make_policy(weights=[("PreferNamedHost", 5)], properties={"PreferredHost": "h2"})
    cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)
    unit = PolicyUnit.objects.get(name="PreferNamedHost")
    assert order(schedule(vm_in(cluster))) == ["h2", "h1"]

    client_for(admin_user).patch(
        f"/api/schedulingpolicyunits/{unit.pk}/", {"enabled": False}, format="json"
    )
    decision = schedule(vm_in(cluster))

    assert order(decision) == ["h1", "h2"]
    assert "PreferNamedHost" not in decision.explanation["scores"]["h2"]["units"]
    assert decision.explanation["disabled_units"] == ["PreferNamedHost"]
