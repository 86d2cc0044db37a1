"""User-written policy units that hang or raise: each call has a time limit
(``CORRAL_SCHEDULING_UNIT_TIMEOUT``), a failed filter keeps or drops every host as its
``on_failure`` says, a failed weight is neutral, a failed balancer moves nothing; one alert per
failure streak; the cluster's scheduling lock is never held past the limit; a unit that hangs
leaves at most one thread behind per process."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import close_old_connections, connection
from django.test.utils import CaptureQueriesContext

from hosts.host_choice import NoHostAvailable, decision, place
from hosts.models import Job, JobState, VirtualMachine
from project.models import Event, EventKind
from scheduling.balancer import balance_cluster
from scheduling.models import PolicyUnit
from scheduling.scheduler import schedule
from tests.conftest import wait_until
from tests.scheduling import user_units as site_units

LIMIT = 0.5
# A hanging unit would wait an hour; a decision that ends within this has not waited for it.
SOON = LIMIT + 5


@pytest.fixture(autouse=True)
def short_limit(settings):
    settings.CORRAL_SCHEDULING_UNIT_TIMEOUT = LIMIT


def _threads_of(unit: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name == f"policy-unit-{unit}")


def _alerts(unit: PolicyUnit):
    return Event.objects.filter(kind=EventKind.ALERT, object_type="policyunit", object_id=unit.pk)


def _timed(fn, *args, **kwargs):
    started = time.monotonic()
    try:
        return fn(*args, **kwargs), time.monotonic() - started
    except NoHostAvailable as exc:
        return exc, time.monotonic() - started


# -- hanging -----------------------------------------------------------------------------------


def test_a_filter_that_hangs_fails_within_the_limit_and_every_host_is_kept(
    site_unit, make_policy, cluster_with, vm_in
):
    site_unit("HangingFilter")
    cluster, _ = cluster_with(hosts=2, policy=make_policy(filters=["HostStatus", "HangingFilter"]))

    decision_, took = _timed(schedule, vm_in(cluster))

    assert took < SOON
    assert [h.name for h in decision_.hosts] == ["h1", "h2"]
    assert decision_.explanation["skipped_units"] == [
        {
            "unit": "HangingFilter",
            "error": f"it did not answer within {LIMIT:g} s",
            "outcome": "every host kept",
        }
    ]


def test_a_unit_still_hanging_is_not_called_again_so_one_thread_at_most_is_left(
    site_unit, make_policy, cluster_with, vm_in
):
    site_unit("HangingFilter")
    cluster, _ = cluster_with(hosts=2, policy=make_policy(filters=["HangingFilter"]))
    schedule(vm_in(cluster))

    later = [_timed(schedule, vm_in(cluster)) for _ in range(3)]

    assert _threads_of("HangingFilter") == 1
    assert all(took < LIMIT for _, took in later)
    errors = {d.explanation["skipped_units"][0]["error"] for d, _ in later}
    assert len(errors) == 1 and errors.pop().endswith("ago has not returned yet")


def test_a_filter_set_to_drop_hosts_when_it_fails_places_nothing_and_says_why(
    site_unit, make_policy, cluster_with, vm_in, admin_user, client_for
):
    [unit] = site_unit("HangingFilter")
    cluster, _ = cluster_with(hosts=2, policy=make_policy(filters=["HangingFilter"]))
    changed = client_for(admin_user).patch(
        f"/api/schedulingpolicyunits/{unit.pk}/", {"on_failure": "drop"}, format="json"
    )
    vm = vm_in(cluster, name="web-1")

    refused, took = _timed(schedule, vm)

    assert changed.status_code == 200 and changed.json()["on_failure"] == "drop"
    assert isinstance(refused, NoHostAvailable) and took < SOON
    why = f"HangingFilter failed (it did not answer within {LIMIT:g} s) (HangingFilter)"
    assert (
        refused.message == f"No host can run web-1 in cluster {cluster.name}: h1: {why}; h2: {why}."
    )
    assert refused.explanation["skipped_units"][0]["outcome"] == "every host dropped"


def test_a_weight_that_hangs_is_neutral(site_unit, make_policy, cluster_with, vm_in, vm_on):
    site_unit("HangingWeight")
    policy = make_policy(weights=["HangingWeight", "OptimalForEvenMemoryDistribution"])
    cluster, (h1, h2) = cluster_with(hosts=2, policy=policy)
    vm_on(h1, memory_mb=1024)

    decision_, took = _timed(schedule, vm_in(cluster))

    assert took < SOON
    assert [h.name for h in decision_.hosts] == ["h2", "h1"]
    assert "HangingWeight" not in decision_.explanation["scores"]["h2"]["units"]
    assert decision_.explanation["skipped_units"][0]["outcome"] == "neutral"


def test_a_balancer_that_hangs_moves_nothing_and_raises_one_alert(
    site_unit, make_policy, cluster_with, vm_on
):
    [unit] = site_unit("HangingBalancer")
    cluster, (h1, _) = cluster_with(hosts=2, policy=make_policy(balance="HangingBalancer"))
    vm_on(h1, vcpus=16)

    first, took = _timed(balance_cluster, cluster.pk)
    second = balance_cluster(cluster.pk)

    assert took < SOON
    assert (first["action"], first["reason"]) == (
        "none",
        f"balancer HangingBalancer failed: it did not answer within {LIMIT:g} s",
    )
    assert second["action"] == "none" and "has not returned yet" in second["reason"]
    assert not Job.objects.exists()
    assert [a.message for a in _alerts(unit)] == [
        f"Policy unit HangingBalancer failed while balancing cluster {cluster.name}: it did "
        f"not answer within {LIMIT:g} s. Until it answers again it moves no VM; no further "
        "alert while it keeps failing."
    ]


# -- one alert per failure streak --------------------------------------------------------------


def test_a_unit_that_keeps_raising_raises_one_alert_and_one_again_after_it_recovered(
    site_unit, make_policy, cluster_with, vm_in, admin_user, client_for
):
    [unit] = site_unit("FlakyFilter")
    cluster, _ = cluster_with(hosts=2, policy=make_policy(filters=["FlakyFilter"]))
    client = client_for(admin_user)

    for _ in range(3):
        schedule(vm_in(cluster, name=f"down-{_}"))
    while_failing = client.get(f"/api/schedulingpolicyunits/{unit.pk}/").json()
    site_units.FLAKY["failing"] = False
    schedule(vm_in(cluster))
    recovered = client.get(f"/api/schedulingpolicyunits/{unit.pk}/").json()
    site_units.FLAKY["failing"] = True
    schedule(vm_in(cluster, name="again"))

    assert [a.message for a in _alerts(unit)] == [
        f"Policy unit FlakyFilter failed while placing VM {name}: the placement service is "
        "down. Until it answers again its filter is skipped: every host is kept; no further "
        "alert while it keeps failing."
        for name in ("down-0", "again")
    ]
    assert all(a.cluster_id == cluster.pk for a in _alerts(unit))
    assert while_failing["failing_since"] is not None
    assert while_failing["failure"] == "the placement service is down"
    assert (recovered["failing_since"], recovered["failure"]) == (None, "")
    assert (
        Event.objects.filter(
            kind=EventKind.CHANGED,
            object_type="policyunit",
            message__startswith="Policy unit FlakyFilter answers again",
        ).count()
        == 1
    )


def test_the_alert_of_a_decision_that_found_no_host_is_kept(
    site_unit, make_policy, cluster_with, vm_in
):
    [unit] = site_unit("FlakyFilter")
    PolicyUnit.objects.filter(pk=unit.pk).update(on_failure="drop")
    cluster, _ = cluster_with(hosts=2, policy=make_policy(filters=["FlakyFilter"]))
    vm = vm_in(cluster)

    with pytest.raises(NoHostAvailable), decision(cluster.pk):
        place(vm)  # the decision's transaction rolls back

    assert _alerts(unit).count() == 1
    assert PolicyUnit.objects.get(pk=unit.pk).failing_since is not None


def test_a_decision_whose_units_all_answer_writes_nothing_about_them(
    site_unit, make_policy, cluster_with, vm_in
):
    site_unit("FlakyFilter")
    site_units.FLAKY["failing"] = False
    cluster, _ = cluster_with(hosts=2, policy=make_policy(filters=["FlakyFilter"]))
    vm = vm_in(cluster)

    with CaptureQueriesContext(connection) as captured:
        schedule(vm)

    written = [q["sql"] for q in captured if not q["sql"].lstrip().upper().startswith("SELECT")]
    assert written == []
    assert not Event.objects.filter(object_type="policyunit").exists()


# -- the scheduling lock -----------------------------------------------------------------------


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("two decisions at once need PostgreSQL's row locks; SQLite has one writer")


def test_a_hanging_unit_holds_the_clusters_lock_no_longer_than_the_limit(
    postgres_only, site_unit, make_policy, cluster_with, vm_in
):
    site_unit("HangingFilter")
    cluster, _ = cluster_with(hosts=2, policy=make_policy(filters=["HangingFilter"]))
    first, second = vm_in(cluster), vm_in(cluster)
    inside = threading.Event()
    waited = {}

    def decide_first() -> None:
        close_old_connections()
        try:
            with decision(cluster.pk):
                inside.set()
                place(first)
        finally:
            connection.close()

    def decide_second() -> None:
        close_old_connections()
        try:
            assert inside.wait(10)
            started = time.monotonic()
            with decision(cluster.pk):
                waited["seconds"] = time.monotonic() - started
                waited["decision"] = place(second)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide_first), threading.Thread(target=decide_second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert waited["seconds"] < SOON
    assert waited["decision"].explanation["skipped_units"][0]["unit"] == "HangingFilter"


# -- a real task cluster -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_task_cluster_places_every_vm_past_a_hanging_and_a_raising_unit_with_one_alert_each(
    site_unit, make_policy, sim_cluster, vm_in, admin_user, client_for, task_cluster
):
    units = site_unit("HangingFilter", "FlakyFilter")
    policy = make_policy(filters=["HostStatus", "Memory", "HangingFilter", "FlakyFilter"])
    cluster, hosts = sim_cluster(policy=policy)
    vms = [vm_in(cluster) for _ in range(4)]
    workers = task_cluster(
        CORRAL_SCHEDULING_UNIT_TIMEOUT="1",
        CORRAL_SCHEDULING_UNITS="tests.scheduling.user_units.HangingFilter,"
        "tests.scheduling.user_units.FlakyFilter",
    )
    client = client_for(admin_user)

    queued = [client.post(f"/api/vms/{vm.pk}/start/").json()["id"] for vm in vms]

    def all_ended():
        return all(
            state in (JobState.SUCCEEDED, JobState.FAILED)
            for state in Job.objects.filter(pk__in=queued).values_list("state", flat=True)
        )

    wait_until(all_ended, timeout=90, message=lambda: workers.log()[-3000:])
    done = list(Job.objects.filter(pk__in=queued))
    assert {job.state for job in done} == {JobState.SUCCEEDED}, [j.error_message for j in done]
    assert all(VirtualMachine.objects.get(pk=vm.pk).status == "up" for vm in vms)
    for job in done:
        placement = job.result["placement"]
        assert {s["unit"] for s in placement["skipped_units"]} == {"HangingFilter", "FlakyFilter"}
        # Waiting for the lock included: at most one hanging call per worker process (3).
        assert placement["seconds"] < 3 * 1 + 5
    assert [_alerts(unit).count() for unit in units] == [1, 1]
