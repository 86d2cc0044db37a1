"""The balancer: one VM off a host that stayed over-utilized, to hosts that stay under the
threshold once it arrives; a dry run that moves nothing; cool-down; VM-count balancing; and a
real migration between simulated hosts that is not undone by the next run."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import driver, jobs
from hosts.models import Host, Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from scheduling import registry
from scheduling.balancer import balance_cluster
from scheduling.models import PolicyUnit


def _hot_since(host, minutes: float) -> None:
    Host.objects.filter(pk=host.pk).update(
        overloaded_since=timezone.now() - timedelta(minutes=minutes)
    )


@pytest.fixture
def hot_cluster(cluster_with, vm_on):
    """An evenly_distributed cluster whose h1 runs 14 of its 16 CPUs' worth of vCPUs (87.5%,
    over HighUtilization 80) in a small VM and a large one; h2 and h3 are idle."""
    cluster, (h1, h2, h3) = cluster_with(hosts=3, policy="evenly_distributed")
    small = vm_on(h1, vcpus=4, memory_mb=256, name="small")
    large = vm_on(h1, vcpus=10, memory_mb=512, name="large")
    return cluster, (h1, h2, h3), (small, large)


def test_a_host_over_high_utilization_for_long_enough_sheds_one_vm(hot_cluster):
    cluster, (h1, h2, h3), (small, large) = hot_cluster
    _hot_since(h1, minutes=10)

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "migrate"
    assert (answer["vm"], answer["from"], answer["candidates"]) == (small.pk, "h1", ["h2", "h3"])
    assert answer["reason"] == "h1 CPU load 88%"
    job = Job.objects.get()
    assert (job.kind, job.vm_id, job.state, answer["job"]) == (
        "migrate",
        small.pk,
        "pending",
        job.pk,
    )
    assert job.params == {"candidates": [h2.pk, h3.pk], "reason": "balance"}


def test_the_dry_run_says_the_same_and_queues_nothing(hot_cluster, admin_user, client_for):
    cluster, (h1, h2, h3), (small, large) = hot_cluster
    _hot_since(h1, minutes=10)

    response = client_for(admin_user).get(f"/api/clusters/{cluster.pk}/balance/")

    assert response.status_code == 200
    shown = response.json()
    assert (shown["action"], shown["vm"], shown["vm_name"]) == ("migrate", small.pk, "small")
    assert shown["candidates"] == ["h2", "h3"]
    assert shown["loads"] == {"h1": 87.5, "h2": 0.0, "h3": 0.0}
    assert not Job.objects.exists()


def test_the_dry_run_is_for_those_who_may_see_the_cluster(
    hot_cluster, make_user, grant, client_for, make_cluster
):
    cluster, _, _ = hot_cluster
    viewer, stranger = make_user(), make_user()
    grant(viewer, "PolicyAdmin", cluster)
    grant(stranger, "ClusterAdmin", make_cluster())

    seen = client_for(viewer).get(f"/api/clusters/{cluster.pk}/balance/")
    hidden = client_for(stranger).get(f"/api/clusters/{cluster.pk}/balance/")

    assert (seen.status_code, hidden.status_code) == (200, 404)


def test_a_host_over_for_less_than_the_duration_keeps_its_vms(hot_cluster):
    cluster, (h1, _, _), _ = hot_cluster
    _hot_since(h1, minutes=1)

    answer = balance_cluster(cluster.pk)

    assert (answer["action"], answer["reason"]) == ("none", "no host needs relief")
    assert not Job.objects.exists()


def test_the_first_run_over_the_threshold_starts_the_clock_and_moves_nothing(hot_cluster):
    cluster, (h1, h2, _), _ = hot_cluster
    before = timezone.now()

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "none"
    h1.refresh_from_db()
    assert h1.overloaded_since >= before
    assert Host.objects.get(pk=h2.pk).overloaded_since is None
    assert not Job.objects.exists()


def test_a_host_back_under_the_threshold_stops_the_clock(hot_cluster):
    cluster, (h1, _, _), (small, large) = hot_cluster
    _hot_since(h1, minutes=10)
    VirtualMachine.objects.filter(pk=large.pk).update(status="down")

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "none"
    assert Host.objects.get(pk=h1.pk).overloaded_since is None


def test_the_dry_run_leaves_the_clock_alone(hot_cluster, admin_user, client_for):
    cluster, (h1, _, _), _ = hot_cluster

    client_for(admin_user).get(f"/api/clusters/{cluster.pk}/balance/")

    assert Host.objects.get(pk=h1.pk).overloaded_since is None


def test_destinations_the_vm_would_push_over_the_threshold_are_not_offered(hot_cluster, vm_on):
    cluster, (h1, h2, h3), (small, _) = hot_cluster
    _hot_since(h1, minutes=10)
    vm_on(h2, vcpus=9)  # 9 + 4 of 16 CPUs = 81%: over 80 once the VM arrived

    answer = balance_cluster(cluster.pk)

    assert (answer["vm"], answer["candidates"]) == (small.pk, ["h3"])
    assert Job.objects.get().params["candidates"] == [h3.pk]


def test_nothing_moves_when_every_destination_would_go_over(hot_cluster, vm_on):
    cluster, (h1, h2, h3), _ = hot_cluster
    _hot_since(h1, minutes=10)
    vm_on(h2, vcpus=9)
    vm_on(h3, vcpus=9)

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "none"
    assert not Job.objects.exists()


def test_a_vm_migrated_within_the_cool_down_is_not_picked_again(hot_cluster):
    cluster, (h1, _, _), (small, large) = hot_cluster
    _hot_since(h1, minutes=10)
    Job.objects.create(
        kind=JobKind.MIGRATE, vm=small, state="succeeded", finished_at=timezone.now()
    )

    answer = balance_cluster(cluster.pk)

    assert answer["vm"] == large.pk


def test_a_vm_migrated_before_the_cool_down_may_move_again(hot_cluster, settings):
    cluster, (h1, _, _), (small, large) = hot_cluster
    settings.CORRAL_BALANCE_COOLDOWN = 600
    _hot_since(h1, minutes=10)
    Job.objects.create(
        kind=JobKind.MIGRATE,
        vm=small,
        state="succeeded",
        finished_at=timezone.now() - timedelta(seconds=601),
    )

    answer = balance_cluster(cluster.pk)

    assert answer["vm"] == small.pk


def test_a_pinned_vm_is_not_moved(hot_cluster):
    cluster, (h1, _, _), (small, large) = hot_cluster
    _hot_since(h1, minutes=10)
    VirtualMachine.objects.filter(pk=small.pk).update(pinned_host=h1)

    answer = balance_cluster(cluster.pk)

    assert answer["vm"] == large.pk


def test_a_policy_without_a_balancer_moves_nothing(cluster_with, vm_on):
    cluster, (h1, _) = cluster_with(hosts=2, policy="none")
    vm_on(h1, vcpus=16)
    _hot_since(h1, minutes=60)

    answer = balance_cluster(cluster.pk)

    assert (answer["action"], answer["reason"]) == ("none", "the policy has no balancer")
    assert not Job.objects.exists()


def test_a_balancer_disabled_through_the_api_moves_nothing(hot_cluster, admin_user, client_for):
    cluster, (h1, _, _), _ = hot_cluster
    _hot_since(h1, minutes=10)
    unit = PolicyUnit.objects.get(name="OptimalForEvenDistributionBalance")

    response = client_for(admin_user).patch(
        f"/api/schedulingpolicyunits/{unit.pk}/", {"enabled": False}, format="json"
    )
    dry_run = client_for(admin_user).get(f"/api/clusters/{cluster.pk}/balance/").json()
    answer = balance_cluster(cluster.pk)

    assert response.status_code == 200
    assert (answer["action"], answer["reason"]) == (
        "none",
        "its balancer OptimalForEvenDistributionBalance is disabled",
    )
    assert dry_run["action"] == "none"
    assert not Job.objects.exists()


def test_a_balancer_taken_out_of_the_policy_moves_nothing(hot_cluster, admin_user, client_for):
    cluster, (h1, _, _), _ = hot_cluster
    _hot_since(h1, minutes=10)
    client = client_for(admin_user)
    copy = client.post(
        f"/api/schedulingpolicies/{cluster.policy_id}/clone/", {"name": "even-copy"}
    ).json()
    client.patch(f"/api/clusters/{cluster.pk}/", {"policy": copy["id"]}, format="json")
    balancer = PolicyUnit.objects.get(name="OptimalForEvenDistributionBalance")
    assert balance_cluster(cluster.pk, dry_run=True)["action"] == "migrate"

    removed = client.delete(f"/api/schedulingpolicies/{copy['id']}/balances/{balancer.pk}/")
    answer = balance_cluster(cluster.pk)

    assert removed.status_code == 204
    assert (answer["action"], answer["reason"]) == ("none", "the policy has no balancer")
    assert not Job.objects.exists()


def test_the_clusters_high_utilization_override_is_used(hot_cluster):
    cluster, (h1, _, _), _ = hot_cluster
    cluster.policy_properties = {"HighUtilization": 90}
    cluster.save()
    _hot_since(h1, minutes=10)

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "none"


# -- vm_evenly_distributed -------------------------------------------------------------------


@pytest.fixture
def counted(cluster_with, vm_on):
    """counted(busy, quiet, **properties) -> (cluster, h1, h2, VMs on h1), vm_evenly_distributed
    with ``busy`` VMs up on h1 and ``quiet`` on h2."""

    def make(busy: int, quiet: int, **properties):
        cluster, (h1, h2) = cluster_with(
            hosts=2, policy="vm_evenly_distributed", policy_properties=properties
        )
        on_h1 = [vm_on(h1) for _ in range(busy)]
        for _ in range(quiet):
            vm_on(h2)
        return cluster, h1, h2, on_h1

    return make


def test_vm_counts_apart_by_the_threshold_move_a_vm_off_the_busiest_host(counted):
    cluster, h1, h2, on_h1 = counted(busy=12, quiet=2)

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "migrate"
    assert (answer["from"], answer["candidates"]) == ("h1", ["h2"])
    assert answer["vm"] in {vm.pk for vm in on_h1}
    assert answer["reason"] == "h1 runs 12 VMs"
    assert Job.objects.get().params["candidates"] == [h2.pk]


@pytest.mark.parametrize(
    ("busy", "quiet", "why"),
    [(10, 0, "not over HighVmCount 10"), (12, 8, "4 apart, under MigrationThreshold 5")],
)
def test_vm_counts_within_the_rules_move_nothing(counted, busy, quiet, why):
    cluster, _, _, _ = counted(busy=busy, quiet=quiet)

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "none", why
    assert not Job.objects.exists()


def test_the_clusters_migration_threshold_override_is_used(counted):
    cluster, _, _, _ = counted(busy=12, quiet=8, MigrationThreshold=3)

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "migrate"


# -- power_saving ----------------------------------------------------------------------------


def test_power_saving_empties_an_under_utilized_host_onto_a_busier_one(cluster_with, vm_on):
    cluster, (h1, h2) = cluster_with(hosts=2, policy="power_saving")
    idle = vm_on(h1, vcpus=2)  # 12.5%: under LowUtilization 20
    vm_on(h2, vcpus=8)  # 50%: between the thresholds

    answer = balance_cluster(cluster.pk)

    assert (answer["action"], answer["vm"], answer["candidates"]) == ("migrate", idle.pk, ["h2"])


# -- a real migration ------------------------------------------------------------------------


def test_the_balancers_job_moves_the_vm_off_the_hot_host_and_the_next_run_leaves_it(
    sim_cluster, vm_in, make_template
):
    cluster, (sim1, sim2, sim3) = sim_cluster(policy="evenly_distributed")
    template = make_template(vcpus=7, memory_mb=128, disk_gb=1)
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="maintenance")
    started = [vm_in(cluster, template=template) for _ in range(2)]
    for vm in started:
        assert jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND) == "succeeded"
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="up")
    _hot_since(sim1, minutes=10)

    first = balance_cluster(cluster.pk)
    outcome = jobs.run(first["job"], OPERATION_BY_KIND)
    second = balance_cluster(cluster.pk)

    moved = VirtualMachine.objects.get(pk=first["vm"])
    assert (first["from"], first["candidates"], outcome) == (
        "sim-1",
        ["sim-2", "sim-3"],
        "succeeded",
    )
    assert Job.objects.get(pk=first["job"]).result["to"] == "sim-2"
    assert (moved.host_id, moved.status) == (sim2.pk, "up")
    assert driver.domain_power_state(sim2.uri, str(moved.uuid)) == "running"
    assert driver.domain_power_state(sim1.uri, str(moved.uuid)) is None
    assert second["action"] == "none"
    assert Job.objects.filter(kind=JobKind.MIGRATE).count() == 1
    assert VirtualMachine.objects.get(pk=moved.pk).host_id == sim2.pk


def test_a_balancer_migration_the_policy_prefers_not_to_make_ends_with_the_vm_staying(
    sim_cluster, vm_in, make_template, make_policy, settings
):
    settings.CORRAL_SCHEDULING_UNITS = ["tests.scheduling.user_units.PreferNamedHost"]
    registry.sync_units()
    # The balancer finds sim-1 hot, but the policy's only weight prefers sim-1 itself.
    policy = make_policy(
        filters=["HostStatus", "Memory", "CPU"],
        weights=["PreferNamedHost"],
        balance="OptimalForEvenDistributionBalance",
        properties={
            "HighUtilization": 80,
            "CpuOverCommitDurationMinutes": 2,
            "PreferredHost": "sim-1",
        },
    )
    cluster, (sim1, sim2, sim3) = sim_cluster(policy=policy)
    template = make_template(vcpus=7, memory_mb=128, disk_gb=1)
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="maintenance")
    started = [vm_in(cluster, template=template) for _ in range(2)]
    for vm in started:
        assert jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND) == "succeeded"
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="up")
    _hot_since(sim1, minutes=10)

    proposed = balance_cluster(cluster.pk)
    outcome = jobs.run(proposed["job"], OPERATION_BY_KIND)

    job = Job.objects.get(pk=proposed["job"])
    kept = VirtualMachine.objects.get(pk=proposed["vm"])
    assert (proposed["action"], proposed["from"], outcome) == ("migrate", "sim-1", "succeeded")
    assert job.result["stayed"] == "sim-1"
    assert job.result["placement"]["outcome"] == "stayed"
    assert (kept.host_id, kept.status, kept.migrating_to_id) == (sim1.pk, "up", None)
    assert driver.domain_power_state(sim1.uri, str(kept.uuid)) == "running"
    assert driver.domain_power_state(sim2.uri, str(kept.uuid)) is None
    assert driver.domain_power_state(sim3.uri, str(kept.uuid)) is None
