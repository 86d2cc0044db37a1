"""The balancer runs on schedule in a real deployment: when each cluster was last balanced is
kept where every ticker sees it (a ticker lives shorter than the balance interval), the host's
over-utilization clock is kept by every sync report, and the power-saving balancer never
offers a host the VM would push over HighUtilization."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import driver, jobs, sync
from hosts.models import Cluster, Host, Job, JobKind, JobState, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from project.models import LoopLock
from project.ticker import Ticker
from scheduling.balancer import balance_cluster
from scheduling.models import PolicyUnit
from scheduling.scheduler import schedule
from tests.conftest import wait_until


def _balanced_by_a_fresh_ticker() -> set[int]:
    """The clusters whose balancer a newly started ticker runs on its first tick."""
    ticker = Ticker()
    try:
        return set(ticker.run_due("balance"))
    finally:
        ticker.pool.shutdown(wait=True)


# -- when a cluster is due -------------------------------------------------------------------


def test_a_fresh_ticker_does_not_balance_again_what_an_old_one_just_balanced(
    transactional_db, make_cluster, settings
):
    settings.CORRAL_BALANCE_INTERVAL = 60
    make_cluster(), make_cluster()
    before = set(Cluster.objects.values_list("pk", flat=True))

    by_the_old_ticker = _balanced_by_a_fresh_ticker()
    added = make_cluster()
    by_its_successor = _balanced_by_a_fresh_ticker()

    assert by_the_old_ticker == before
    assert by_its_successor == {added.pk}


def test_a_cluster_is_balanced_again_once_the_interval_has_passed(
    transactional_db, make_cluster, settings, time_machine
):
    settings.CORRAL_BALANCE_INTERVAL = 1.5
    time_machine.move_to(timezone.now(), tick=False)  # time passes only when shifted
    cluster = make_cluster()

    first = _balanced_by_a_fresh_ticker()
    at_once = _balanced_by_a_fresh_ticker()
    time_machine.shift(1.6)
    later = _balanced_by_a_fresh_ticker()

    assert (first, at_once, later) == ({cluster.pk}, set(), {cluster.pk})


def test_the_prestart_monitor_keeps_its_interval_across_tickers(transactional_db, settings):
    settings.VMPOOL_MONITOR_INTERVAL = 60
    tickers = [Ticker(), Ticker()]
    try:
        ran = [bool(ticker.run_due("pool-monitor")) for ticker in tickers]
    finally:
        for ticker in tickers:
            ticker.pool.shutdown(wait=True)

    assert ran == [True, False]


@pytest.mark.slow
def test_a_task_cluster_moves_a_vm_off_a_hot_host_though_tickers_live_shorter_than_the_interval(
    sim_cluster, vm_in, make_template, task_cluster
):
    cluster, (sim1, sim2, sim3) = sim_cluster(policy="evenly_distributed")
    template = make_template(vcpus=7, memory_mb=128, disk_gb=1)
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="maintenance")
    started = [vm_in(cluster, template=template) for _ in range(2)]
    for vm in started:
        assert jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND) == "succeeded"
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="up")
    # 14 of 16 CPUs given (87.5%, over HighUtilization 80) for longer than the duration.
    Host.objects.filter(pk=sim1.pk).update(overloaded_since=timezone.now() - timedelta(minutes=10))

    workers = task_cluster(CORRAL_TICKER_RUN_SECONDS="1", CORRAL_BALANCE_INTERVAL="3")

    def moved_off() -> Job | None:
        job = Job.objects.filter(kind=JobKind.MIGRATE, state=JobState.SUCCEEDED).first()
        if job and VirtualMachine.objects.get(pk=job.vm_id).host_id != sim1.pk:
            return job
        return None

    job = wait_until(
        moved_off,
        timeout=60,
        message=lambda: f"no VM left the hot host: {workers.log()[-3000:]}",
    )
    vm = VirtualMachine.objects.get(pk=job.vm_id)
    assert job.params["reason"] == "balance"
    assert vm.host_id in {sim2.pk, sim3.pk}
    assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "running"
    assert driver.domain_power_state(sim1.uri, str(vm.uuid)) is None


@pytest.mark.slow
def test_a_task_cluster_never_balances_with_a_disabled_balancer_and_does_once_it_is_enabled(
    sim_cluster, vm_in, make_template, task_cluster, admin_user, client_for
):
    cluster, (sim1, sim2, sim3) = sim_cluster(policy="evenly_distributed")
    template = make_template(vcpus=7, memory_mb=128, disk_gb=1)
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="maintenance")
    for vm in [vm_in(cluster, template=template) for _ in range(2)]:
        assert jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND) == "succeeded"
    Host.objects.filter(pk__in=[sim2.pk, sim3.pk]).update(status="up")
    Host.objects.filter(pk=sim1.pk).update(overloaded_since=timezone.now() - timedelta(minutes=10))
    balancer = PolicyUnit.objects.get(name="OptimalForEvenDistributionBalance")
    client = client_for(admin_user)
    assert (
        client.patch(
            f"/api/schedulingpolicyunits/{balancer.pk}/", {"enabled": False}, format="json"
        ).json()["enabled"]
        is False
    )
    since = timezone.now()

    workers = task_cluster(CORRAL_TICKER_RUN_SECONDS="1", CORRAL_BALANCE_INTERVAL="1")
    due = f"due-balance-{cluster.pk}"

    def balanced_runs_after(moment) -> bool:
        lock = LoopLock.objects.filter(name=due).first()
        return lock is not None and lock.expires_at - timedelta(seconds=1) > moment

    # Three runs of the cluster's balancer: the last claimed two seconds after the first.
    wait_until(lambda: balanced_runs_after(since + timedelta(seconds=3)), timeout=60)
    assert not Job.objects.filter(kind=JobKind.MIGRATE).exists()

    client.patch(f"/api/schedulingpolicyunits/{balancer.pk}/", {"enabled": True}, format="json")
    moved = wait_until(
        lambda: Job.objects.filter(kind=JobKind.MIGRATE, state=JobState.SUCCEEDED).first(),
        timeout=60,
        message=lambda: f"no VM left the hot host: {workers.log()[-3000:]}",
    )
    assert moved.params["reason"] == "balance"


# -- the over-utilization clock --------------------------------------------------------------


def _report(*vms: VirtualMachine, power_state: str = "running") -> driver.HostReport:
    return driver.HostReport(
        cpus=16,
        memory_mb=3072,
        cpu_model="x86_64",
        domains=[driver.DomainReport(str(vm.uuid), vm.name, power_state) for vm in vms],
        networks=["default"],
    )


@pytest.fixture
def guarded_cluster(cluster_with, make_policy):
    """A cluster whose policy keeps VMs off hosts over HighUtilization for the duration, and
    has no balancer."""
    policy = make_policy(filters=["HostStatus", "Memory", "CPU", "CPUOverloaded"])
    return cluster_with(hosts=2, policy=policy)


def test_a_sync_report_of_a_host_over_high_utilization_starts_its_clock(guarded_cluster, vm_on):
    cluster, (h1, h2) = guarded_cluster
    busy = vm_on(h1, vcpus=14)  # 87.5% of 16 CPUs
    quiet = vm_on(h2, vcpus=2)
    before = timezone.now()

    sync.apply_report(h1.pk, _report(busy))
    sync.apply_report(h2.pk, _report(quiet))

    assert Host.objects.get(pk=h1.pk).overloaded_since >= before
    assert Host.objects.get(pk=h2.pk).overloaded_since is None


def test_later_reports_keep_the_clock_so_the_overloaded_filter_works_without_a_balancer(
    guarded_cluster, vm_on, vm_in
):
    cluster, (h1, h2) = guarded_cluster
    busy = vm_on(h1, vcpus=14)
    sync.apply_report(h1.pk, _report(busy))
    went_over = timezone.now() - timedelta(minutes=10)  # as if the report came 10 minutes ago
    Host.objects.filter(pk=h1.pk).update(overloaded_since=went_over)

    sync.apply_report(h1.pk, _report(busy))
    decision = schedule(vm_in(cluster))

    assert Host.objects.get(pk=h1.pk).overloaded_since == went_over
    assert decision.host_ids == [h2.pk]
    assert decision.explanation["filters"] == [
        {"unit": "CPUOverloaded", "removed": {"h1": "CPU load 88% over 80%"}}
    ]


def test_a_sync_report_of_a_host_back_under_the_threshold_stops_its_clock(guarded_cluster, vm_on):
    cluster, (h1, _) = guarded_cluster
    busy = vm_on(h1, vcpus=14)
    sync.apply_report(h1.pk, _report(busy))
    assert Host.objects.get(pk=h1.pk).overloaded_since is not None

    sync.apply_report(h1.pk, _report(busy, power_state="shutoff"))

    assert VirtualMachine.objects.get(pk=busy.pk).status == "down"
    assert Host.objects.get(pk=h1.pk).overloaded_since is None


def test_the_sync_uses_the_clusters_high_utilization(guarded_cluster, vm_on):
    cluster, (h1, _) = guarded_cluster
    cluster.policy_properties = {"HighUtilization": 90}
    cluster.save()
    busy = vm_on(h1, vcpus=14)

    sync.apply_report(h1.pk, _report(busy))

    assert Host.objects.get(pk=h1.pk).overloaded_since is None


def test_a_policy_edited_after_a_report_counts_from_the_next_report(guarded_cluster, vm_on):
    cluster, (h1, _) = guarded_cluster
    busy = vm_on(h1, vcpus=14)  # 87.5%
    sync.apply_report(h1.pk, _report(busy))
    assert Host.objects.get(pk=h1.pk).overloaded_since is not None

    policy = cluster.policy
    policy.properties = {**policy.properties, "HighUtilization": 95}
    policy.save()
    sync.apply_report(h1.pk, _report(busy))

    assert Host.objects.get(pk=h1.pk).overloaded_since is None


def test_a_threshold_changed_by_another_process_counts_within_one_sync_interval(
    guarded_cluster, vm_on, settings, time_machine
):
    settings.CORRAL_SYNC_INTERVAL = 5
    time_machine.move_to(timezone.now(), tick=False)
    cluster, (h1, _) = guarded_cluster
    busy = vm_on(h1, vcpus=14)  # 87.5%
    sync.apply_report(h1.pk, _report(busy))
    # As another process (the web tier) writes it: this process is not told.
    Cluster.objects.filter(pk=cluster.pk).update(policy_properties={"HighUtilization": 95})

    sync.apply_report(h1.pk, _report(busy))
    still_over = Host.objects.get(pk=h1.pk).overloaded_since is not None
    time_machine.shift(5.1)
    sync.apply_report(h1.pk, _report(busy))

    assert still_over
    assert Host.objects.get(pk=h1.pk).overloaded_since is None


# -- power saving ----------------------------------------------------------------------------


def test_power_saving_does_not_offer_a_host_the_vm_would_push_over_high_utilization(
    cluster_with, vm_on
):
    cluster, (h1, h2, h3) = cluster_with(hosts=3, policy="power_saving")
    idle = vm_on(h1, vcpus=2)  # 12.5%: under LowUtilization 20, to be emptied
    vm_on(h2, vcpus=11)  # 68.75%, 81.25% with the VM: over HighUtilization 80
    vm_on(h3, vcpus=6)  # 37.5%, 50% with the VM

    answer = balance_cluster(cluster.pk)

    assert (answer["action"], answer["vm"], answer["candidates"]) == ("migrate", idle.pk, ["h3"])
    assert Job.objects.get().params["candidates"] == [h3.pk]


def test_power_saving_moves_nothing_when_every_busier_host_would_go_over(cluster_with, vm_on):
    cluster, (h1, h2) = cluster_with(hosts=2, policy="power_saving")
    vm_on(h1, vcpus=2)
    vm_on(h2, vcpus=11)

    answer = balance_cluster(cluster.pk)

    assert answer["action"] == "none"
    assert not Job.objects.exists()
