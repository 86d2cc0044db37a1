"""/metrics: Prometheus figures read from the database, for a scraper with the token or an admin."""

import math
import stat
import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from hosts import jobs, sync
from hosts.host_choice import decision
from hosts.models import Host, Job, JobKind, JobState, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from leases.models import Lease, LeaseEvent
from tests.hosts.fixtures import remove_domains

TOKEN = "scrape-me-0123456789"


@pytest.fixture
def scraper(client, settings):
    """scrape() -> {(sample name, ((label, value), ...)): value}, with the metrics token."""
    settings.CORRAL_METRICS_TOKEN = TOKEN

    def scrape() -> dict:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain")
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples
        }

    return scrape


def by_label(figures: dict, name: str, label: str) -> dict:
    """The samples of one single-label metric, as label value -> value."""
    return {
        dict(labels)[label]: value
        for (sample, labels), value in figures.items()
        if sample == name and len(labels) == 1
    }


# -- who may scrape ----------------------------------------------------------------------------


def test_metrics_is_a_404_for_anonymous_callers_and_wrong_tokens(db, client, settings):
    settings.CORRAL_METRICS_TOKEN = TOKEN

    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 404


def test_without_a_configured_token_no_bearer_header_opens_metrics(db, client, settings):
    settings.CORRAL_METRICS_TOKEN = ""

    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer").status_code == 404


def test_the_configured_token_opens_metrics(db, client, settings):
    settings.CORRAL_METRICS_TOKEN = TOKEN

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 200
    assert b"corral_hosts{" in response.content


def test_a_user_who_may_view_hosts_system_wide_may_scrape(db, client, make_user, grant):
    admin = make_user()
    grant(admin, "ClusterAdmin")  # on the System
    client.force_login(admin)

    assert client.get("/metrics").status_code == 200


def test_a_user_who_may_view_hosts_of_one_cluster_only_gets_a_404(
    db, client, make_user, grant, make_cluster
):
    admin = make_user()
    grant(admin, "ClusterAdmin", make_cluster())
    client.force_login(admin)

    assert client.get("/metrics").status_code == 404


def test_a_user_without_grants_gets_a_404(db, client, make_user):
    client.force_login(make_user())

    assert client.get("/metrics").status_code == 404


# -- what it counts ----------------------------------------------------------------------------


def test_jobs_are_counted_by_state_and_kind_and_recent_failures_apart(db, scraper, make_vm):
    now = timezone.now()
    vm = make_vm()
    Job.objects.create(kind=JobKind.START, vm=vm, state=JobState.SUCCEEDED)
    Job.objects.create(kind=JobKind.START, vm=vm, state=JobState.SUCCEEDED)
    Job.objects.create(kind=JobKind.MIGRATE, vm=vm, state=JobState.RUNNING)
    Job.objects.create(
        kind=JobKind.START, vm=vm, state=JobState.FAILED, finished_at=now - timedelta(minutes=5)
    )
    Job.objects.create(
        kind=JobKind.SHUTDOWN, vm=vm, state=JobState.FAILED, finished_at=now - timedelta(hours=2)
    )

    figures = scraper()

    def jobs_of(state, kind):
        return figures[("corral_jobs", (("kind", kind), ("state", state)))]

    assert jobs_of("succeeded", "start") == 2
    assert jobs_of("running", "migrate") == 1
    assert jobs_of("failed", "start") == 1
    assert jobs_of("failed", "shutdown") == 1
    assert jobs_of("pending", "start") == 0
    assert sum(v for (name, _), v in figures.items() if name == "corral_jobs") == 5
    assert figures[("corral_jobs_failed_last_hour", ())] == 1


def test_hosts_are_counted_by_status_with_how_long_since_each_reported(
    db, scraper, make_cluster, make_host
):
    cluster = make_cluster("metrics-dc")
    now = timezone.now()
    make_host(cluster, "fresh", status="up", last_seen_at=now - timedelta(seconds=30))
    make_host(cluster, "silent", status="non_responsive", last_seen_at=now - timedelta(hours=1))
    make_host(cluster, "new", status="connecting")

    figures = scraper()
    elapsed = (timezone.now() - now).total_seconds()

    assert by_label(figures, "corral_hosts", "status") == {
        "connecting": 1,
        "up": 1,
        "maintenance": 0,
        "non_responsive": 1,
        "error": 0,
    }

    def lag(host):
        return figures[
            ("corral_host_sync_lag_seconds", (("cluster", "metrics-dc"), ("host", host)))
        ]

    assert 30 <= lag("fresh") <= 30 + elapsed
    assert 3600 <= lag("silent") <= 3600 + elapsed
    assert math.isnan(lag("new"))
    key = (
        "corral_host_status",
        (("cluster", "metrics-dc"), ("host", "silent"), ("status", "non_responsive")),
    )
    assert figures[key] == 1


def test_vms_are_counted_by_status(db, scraper, make_vm, make_cluster):
    cluster = make_cluster()
    for status in ("up", "up", "down", "migrating"):
        make_vm(cluster, status=status)

    vms = by_label(scraper(), "corral_vms", "status")

    assert (vms["up"], vms["down"], vms["migrating"], vms["paused"]) == (2, 1, 1, 0)


def test_pools_show_prestarted_vms_against_their_target_and_how_many_fall_short(
    db, scraper, make_pool, make_vm, make_user
):
    short = make_pool(name="short", size=6, prestarted_vms=4)
    full = make_pool(name="full", size=2, prestarted_vms=1)
    make_pool(name="none-wanted", size=2, prestarted_vms=0)

    def pool_vm(pool, **fields):
        return make_vm(pool.cluster, pool.template, pool=pool, **fields)

    pool_vm(short, status="up")  # prestarted
    pool_vm(short, status="starting")  # being prestarted
    queued = pool_vm(short, status="down")  # its start job is pending: being prestarted
    Job.objects.create(kind=JobKind.START, vm=queued, state=JobState.PENDING)
    pool_vm(short, status="up", owner=make_user())  # taken: not prestarted
    pool_vm(short, status="up", admin_hold=True)  # held back: not prestarted
    pool_vm(short, status="down")
    pool_vm(full, status="up")

    figures = scraper()

    assert by_label(figures, "corral_pool_prestarted", "pool") == {
        "full": 1,
        "none-wanted": 0,
        "short": 3,
    }
    assert by_label(figures, "corral_pool_prestarted_target", "pool") == {
        "full": 1,
        "none-wanted": 0,
        "short": 4,
    }
    assert figures[("corral_pools_below_level", ())] == 1


def test_leases_and_their_events_are_counted_by_status(db, scraper, make_user):
    owner, now = make_user(), timezone.now()

    def lease(status, **events):
        made = Lease.objects.create(
            name=f"lease-{status}",
            owner=owner,
            start_date=now,
            end_date=now + timedelta(hours=1),
            status=status,
        )
        for event_type, event_status in events.items():
            LeaseEvent.objects.create(
                lease=made, event_type=event_type, time=now, status=event_status
            )

    lease("ACTIVE", start_lease="DONE", end_lease="UNDONE")
    lease("ACTIVE", start_lease="DONE", end_lease="UNDONE")
    lease("PENDING", start_lease="ERROR", end_lease="UNDONE")

    figures = scraper()

    leases = by_label(figures, "corral_leases", "status")
    assert (leases["ACTIVE"], leases["PENDING"], leases["TERMINATED"]) == (2, 1, 0)

    def events(kind, status):
        return figures[("corral_lease_events", (("kind", kind), ("status", status)))]

    assert events("start_lease", "DONE") == 2
    assert events("start_lease", "ERROR") == 1
    assert events("end_lease", "UNDONE") == 3
    assert events("before_end_lease", "UNDONE") == 0


# -- scheduler decisions, made by real start jobs on simulated hosts -----------------------------


@pytest.fixture
def sim_cluster(transactional_db, sim_daemons, make_cluster):
    cluster = make_cluster()
    for daemon in sim_daemons:
        host = Host.objects.create(name=daemon.name, cluster=cluster, uri=daemon.uri)
        sync.sync_host(host.pk)
    yield cluster
    remove_domains(sim_daemons, VirtualMachine.objects.values_list("uuid", flat=True))


def _failing_post_start_hook(folder):
    script = folder / "vm-post-start" / "refuse"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\nexit 2\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_scheduler_decisions_are_counted_by_outcome_with_their_latency(
    sim_cluster, make_vm, make_template, scraper, settings, tmp_path
):
    small = make_template(memory_mb=128, vcpus=1, disk_gb=1)
    placed = jobs.submit(JobKind.START, vm=make_vm(sim_cluster, small))
    too_big = jobs.submit(JobKind.START, vm=make_vm(sim_cluster, small, memory_mb=8192))
    assert jobs.run(placed.pk, OPERATION_BY_KIND) == "succeeded"
    assert jobs.run(too_big.pk, OPERATION_BY_KIND) == "failed"
    # Placed, then failed by a hook: the decision still counts, and stays on the job.
    settings.CORRAL_HOOKS_DIR = tmp_path / "hooks"
    _failing_post_start_hook(settings.CORRAL_HOOKS_DIR)
    hooked = jobs.submit(JobKind.START, vm=make_vm(sim_cluster, small))
    assert jobs.run(hooked.pk, OPERATION_BY_KIND) == "failed"

    figures = scraper()

    assert by_label(figures, "corral_scheduler_decisions_total", "outcome") == {
        "placed": 2,
        "stayed": 0,
        "no_host": 1,
        "busy": 0,
    }
    stored = [Job.objects.get(pk=job.pk).result["placement"] for job in (placed, too_big, hooked)]
    assert [p["outcome"] for p in stored] == ["placed", "no_host", "placed"]
    assert all(p["seconds"] > 0 for p in stored)
    assert stored[2]["order"], "the failed job keeps why it chose its host"
    name = "corral_scheduler_decision_seconds_last_hour"
    assert figures[(f"{name}_count", ())] == 3
    assert figures[(f"{name}_sum", ())] == pytest.approx(sum(p["seconds"] for p in stored))


def test_a_start_that_found_the_scheduler_busy_counts_as_busy(
    sim_cluster, make_vm, make_template, scraper, settings
):
    if connection.vendor != "postgresql":
        pytest.skip("waiting for a row lock gives up only on PostgreSQL")
    settings.CORRAL_SCHEDULER_LOCK_TIMEOUT = 0.3
    job = jobs.submit(JobKind.START, vm=make_vm(sim_cluster, make_template(memory_mb=128)))
    entered, release = threading.Event(), threading.Event()

    def holder():
        close_old_connections()
        with decision(sim_cluster.pk):
            entered.set()
            release.wait(10)
        connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    entered.wait(5)
    try:
        assert jobs.run(job.pk, OPERATION_BY_KIND) == "failed"
    finally:
        release.set()
        thread.join()

    figures = scraper()

    assert Job.objects.get(pk=job.pk).result["placement"]["outcome"] == "busy"
    assert by_label(figures, "corral_scheduler_decisions_total", "outcome")["busy"] == 1


def test_decisions_of_jobs_started_over_an_hour_ago_leave_the_latency_summary(db, scraper, make_vm):
    vm, now = make_vm(), timezone.now()
    for started, seconds in ((now - timedelta(hours=2), 4.0), (now - timedelta(minutes=1), 0.5)):
        Job.objects.create(
            kind=JobKind.START,
            vm=vm,
            state=JobState.SUCCEEDED,
            started_at=started,
            result={"placement": {"outcome": "placed", "seconds": seconds, "order": ["h"]}},
        )

    figures = scraper()

    assert figures[("corral_scheduler_decisions_total", (("outcome", "placed"),))] == 2
    assert figures[("corral_scheduler_decision_seconds_last_hour_count", ())] == 1
    assert figures[("corral_scheduler_decision_seconds_last_hour_sum", ())] == 0.5


# -- cost --------------------------------------------------------------------------------------


def _fleet(n, make_cluster, make_host, make_vm, make_pool, make_user):
    """n of everything metrics read: hosts, VMs, jobs, pools with VMs, leases with events."""
    owner, now = make_user(), timezone.now()
    cluster = make_cluster()
    for _ in range(n):
        make_host(cluster, status="up", last_seen_at=now)
        pool = make_pool(cluster, size=2, prestarted_vms=2)
        vm = make_vm(cluster, pool.template, pool=pool, status="up")
        Job.objects.create(
            kind=JobKind.START,
            vm=vm,
            state=JobState.SUCCEEDED,
            started_at=now,
            result={"placement": {"outcome": "placed", "seconds": 0.01}},
        )
        Job.objects.create(kind=JobKind.SHUTDOWN, vm=vm, state=JobState.FAILED, finished_at=now)
        lease = Lease.objects.create(
            name="l", owner=owner, start_date=now, end_date=now + timedelta(hours=1)
        )
        LeaseEvent.objects.create(lease=lease, event_type="start_lease", time=now)


def test_a_scrape_costs_the_same_queries_whatever_the_number_of_rows(
    db,
    scraper,
    django_assert_max_num_queries,
    make_cluster,
    make_host,
    make_vm,
    make_pool,
    make_user,
):
    makers = (make_cluster, make_host, make_vm, make_pool, make_user)
    _fleet(2, *makers)
    with django_assert_max_num_queries(9):
        small = scraper()

    _fleet(20, *makers)
    with django_assert_max_num_queries(9):
        large = scraper()

    assert by_label(small, "corral_hosts", "status")["up"] == 2
    assert by_label(large, "corral_hosts", "status")["up"] == 22
    assert large[("corral_jobs_failed_last_hour", ())] == 22
