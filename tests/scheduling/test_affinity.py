"""Affinity groups: VMs kept apart or together, strictly (a filter) or as a preference (a
weight), on or off given hosts; and the affinity group API's validation and permissions."""

import pytest

from hosts import jobs
from hosts.models import Host, JobKind
from hosts.operations import OPERATION_BY_KIND
from scheduling.models import AffinityGroup
from scheduling.scheduler import NoHostAvailable, schedule

GROUPS = "/api/affinitygroups/"


def order(decision) -> list[str]:
    return [host.name for host in decision.hosts]


@pytest.fixture
def group_of(db):
    """group_of(cluster, *vms, hosts=(), **rules) -> an affinity group named "g"."""

    def make(cluster, *vms, hosts=(), **rules) -> AffinityGroup:
        group = AffinityGroup.objects.create(cluster=cluster, name="g", **rules)
        group.vms.set(vms)
        group.hosts.set(hosts)
        return group

    return make


# -- VM rules --------------------------------------------------------------------------------


def test_an_enforcing_negative_group_keeps_its_vms_on_different_hosts(
    cluster_with, vm_in, vm_on, group_of
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    first = vm_on(h1)
    vm_on(h2, memory_mb=1024)  # without the group, h1 would be chosen (more free memory)
    second = vm_in(cluster)
    group_of(cluster, first, second, vm_rule="negative", vm_enforcing=True)

    decision = schedule(second)

    assert order(decision) == ["h2"]
    assert decision.explanation["filters"] == [
        {
            "unit": "VmAffinityGroups",
            "removed": {"h1": "affinity group g: another of its VMs runs here"},
        }
    ]


def test_an_enforcing_negative_group_counts_a_vm_still_starting(
    cluster_with, vm_in, vm_on, group_of
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    first = vm_on(h1, status="starting")
    second = vm_in(cluster)
    group_of(cluster, first, second, vm_rule="negative", vm_enforcing=True)

    assert order(schedule(second)) == ["h2"]


def test_an_enforcing_negative_group_ignores_members_that_are_down(
    cluster_with, vm_in, vm_on, group_of
):
    cluster, (h1,) = cluster_with(hosts=1)
    first = vm_on(h1, status="down")
    second = vm_in(cluster)
    group_of(cluster, first, second, vm_rule="negative", vm_enforcing=True)

    assert order(schedule(second)) == ["h1"]


def test_an_enforcing_negative_group_with_one_host_fails_the_second_start(
    sim_cluster, vm_in, group_of
):
    cluster, (sim1,) = sim_cluster(count=1)
    first, second = vm_in(cluster), vm_in(cluster)
    group_of(cluster, first, second, vm_rule="negative", vm_enforcing=True)
    assert jobs.run(jobs.submit(JobKind.START, vm=first).pk, OPERATION_BY_KIND) == "succeeded"

    job = jobs.submit(JobKind.START, vm=second)
    outcome = jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    assert (outcome, job.error_code) == ("failed", "no_host")
    assert "sim-1: affinity group g: another of its VMs runs here (VmAffinityGroups)" in (
        job.error_message
    )
    second.refresh_from_db()
    assert (second.status, second.host_id) == ("down", None)


@pytest.mark.parametrize(("rule", "chosen"), [("disabled", "h1"), ("negative", "h2")])
def test_a_soft_negative_group_prefers_hosts_apart(
    cluster_with, vm_in, vm_on, group_of, rule, chosen
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    first = vm_on(h1)
    vm_on(h2)  # the same load on both hosts: only the group tells them apart
    second = vm_in(cluster)
    group_of(cluster, first, second, vm_rule=rule, vm_enforcing=False)

    decision = schedule(second)

    assert decision.host.name == chosen
    assert decision.explanation["filters"] == []


def test_a_soft_negative_group_still_starts_its_vms_together_when_it_must(
    cluster_with, vm_in, vm_on, group_of
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    Host.objects.filter(pk=h2.pk).update(status="maintenance")
    first = vm_on(h1)
    second = vm_in(cluster)
    group_of(cluster, first, second, vm_rule="negative", vm_enforcing=False)

    decision = schedule(second)

    assert order(decision) == ["h1"]
    assert decision.explanation["scores"]["h1"]["units"]["VmAffinityGroups"]["score"] == 1.0


def test_an_enforcing_positive_group_keeps_its_vms_together(cluster_with, vm_in, vm_on, group_of):
    cluster, (h1, h2) = cluster_with(hosts=2)
    first = vm_on(h2, memory_mb=1024)  # h1 has more free memory; the group wins
    second = vm_in(cluster)
    group_of(cluster, first, second, vm_rule="positive", vm_enforcing=True)

    decision = schedule(second)

    assert order(decision) == ["h2"]
    assert decision.explanation["filters"] == [
        {"unit": "VmAffinityGroups", "removed": {"h1": "affinity group g: its VMs run elsewhere"}}
    ]


def test_an_enforcing_positive_group_with_no_member_running_goes_anywhere(
    cluster_with, vm_in, group_of
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    first, second = vm_in(cluster), vm_in(cluster)
    group_of(cluster, first, second, vm_rule="positive", vm_enforcing=True)

    assert order(schedule(second)) == ["h1", "h2"]


def test_an_enforcing_positive_group_fails_when_its_host_is_full(
    cluster_with, vm_in, vm_on, group_of
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    first = vm_on(h2, memory_mb=3000)
    second = vm_in(cluster, memory_mb=512)
    group_of(cluster, first, second, vm_rule="positive", vm_enforcing=True)

    with pytest.raises(NoHostAvailable) as raised:
        schedule(second)

    assert "h2: 72 MiB free, 512 MiB needed (Memory)" in raised.value.message
    assert "h1: affinity group g: its VMs run elsewhere (VmAffinityGroups)" in raised.value.message


def test_a_soft_positive_group_prefers_the_host_its_vms_run_on(
    cluster_with, vm_in, vm_on, group_of
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    vm_on(h1)
    first = vm_on(h2)
    second = vm_in(cluster)
    group_of(cluster, first, second, vm_rule="positive", vm_enforcing=False)

    assert order(schedule(second)) == ["h2", "h1"]


# -- host rules ------------------------------------------------------------------------------


def test_an_enforcing_positive_host_rule_keeps_the_vm_on_the_groups_hosts(
    cluster_with, vm_in, group_of
):
    cluster, (h1, h2, h3) = cluster_with(hosts=3)
    vm = vm_in(cluster)
    group_of(cluster, vm, hosts=[h2], vm_rule="disabled", host_rule="positive")

    decision = schedule(vm)

    assert order(decision) == ["h2"]
    assert decision.explanation["filters"][0]["removed"] == {
        "h1": "affinity group g: not one of its hosts",
        "h3": "affinity group g: not one of its hosts",
    }


def test_an_enforcing_negative_host_rule_keeps_the_vm_off_the_groups_hosts(
    cluster_with, vm_in, group_of
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    vm = vm_in(cluster)
    group_of(cluster, vm, hosts=[h1], vm_rule="disabled", host_rule="negative")

    decision = schedule(vm)

    assert order(decision) == ["h2"]
    assert decision.explanation["filters"][0]["removed"] == {
        "h1": "affinity group g: one of the hosts it avoids"
    }


def test_a_soft_positive_host_rule_prefers_the_groups_hosts(cluster_with, vm_in, group_of):
    cluster, (h1, h2) = cluster_with(hosts=2)
    vm = vm_in(cluster)
    group_of(
        cluster, vm, hosts=[h2], vm_rule="disabled", host_rule="positive", host_enforcing=False
    )

    assert order(schedule(vm)) == ["h2", "h1"]


def test_host_rules_apply_only_to_the_groups_vms(cluster_with, vm_in, group_of):
    cluster, (h1, h2) = cluster_with(hosts=2)
    member, outsider = vm_in(cluster), vm_in(cluster)
    group_of(cluster, member, hosts=[h2], vm_rule="disabled", host_rule="positive")

    assert order(schedule(outsider)) == ["h1", "h2"]


# -- API: validation -------------------------------------------------------------------------


@pytest.fixture
def cluster_admin(make_user, grant, client_for):
    """cluster_admin(cluster) -> a client for a user holding ClusterAdmin on ``cluster``."""

    def make(cluster):
        user = make_user()
        grant(user, "ClusterAdmin", cluster)
        return client_for(user)

    return make


def test_a_group_is_made_with_vms_and_hosts_of_its_cluster(
    cluster_with, vm_in, admin_user, client_for
):
    cluster, (h1, h2) = cluster_with(hosts=2)
    a, b = vm_in(cluster), vm_in(cluster)

    response = client_for(admin_user).post(
        GROUPS,
        {
            "cluster": cluster.pk,
            "name": "web",
            "vms": [a.pk, b.pk],
            "hosts": [h2.pk],
            "vm_rule": "negative",
            "vm_enforcing": False,
            "host_rule": "positive",
        },
    )

    assert response.status_code == 201, response.json()
    group = AffinityGroup.objects.get(pk=response.json()["id"])
    assert set(group.vms.all()) == {a, b}
    assert list(group.hosts.all()) == [h2]
    assert (group.vm_rule, group.vm_enforcing, group.host_rule) == ("negative", False, "positive")


@pytest.mark.parametrize("field", ["vms", "hosts"])
def test_vms_and_hosts_must_belong_to_the_groups_cluster(
    cluster_with, vm_in, admin_user, client_for, field
):
    cluster, _ = cluster_with(hosts=1)
    elsewhere, (foreign_host,) = cluster_with(hosts=1)
    foreign = {"vms": vm_in(elsewhere, name="stray"), "hosts": foreign_host}[field]

    response = client_for(admin_user).post(
        GROUPS, {"cluster": cluster.pk, "name": "web", field: [foreign.pk]}
    )

    assert response.status_code == 400
    assert response.json()[field] == [f"Not in cluster {cluster.name}: {foreign.name}."]
    assert not AffinityGroup.objects.exists()


def test_a_vm_of_another_cluster_cannot_be_added_to_a_group_later(
    cluster_with, vm_in, admin_user, client_for, group_of
):
    cluster, _ = cluster_with(hosts=1)
    elsewhere, _ = cluster_with(hosts=1)
    member = vm_in(cluster)
    group = group_of(cluster, member)

    response = client_for(admin_user).patch(
        f"{GROUPS}{group.pk}/", {"vms": [member.pk, vm_in(elsewhere).pk]}
    )

    assert response.status_code == 400
    assert list(group.vms.all()) == [member]


def test_group_names_are_unique_in_a_cluster(make_cluster, admin_user, client_for, group_of):
    cluster = make_cluster()
    group_of(cluster)

    response = client_for(admin_user).post(GROUPS, {"cluster": cluster.pk, "name": "g"})

    assert response.status_code == 400
    assert "name" in response.json()


def test_an_unknown_rule_is_refused(make_cluster, admin_user, client_for):
    response = client_for(admin_user).post(
        GROUPS, {"cluster": make_cluster().pk, "name": "g", "vm_rule": "sideways"}
    )

    assert response.status_code == 400
    assert "vm_rule" in response.json()


# -- API: permissions ------------------------------------------------------------------------


def test_a_cluster_admin_manages_groups_in_their_cluster(cluster_with, vm_in, cluster_admin):
    cluster, (h1,) = cluster_with(hosts=1)
    vm = vm_in(cluster)
    client = cluster_admin(cluster)

    made = client.post(GROUPS, {"cluster": cluster.pk, "name": "g", "vms": [vm.pk]})
    changed = client.patch(f"{GROUPS}{made.json()['id']}/", {"vm_enforcing": False})
    deleted = client.delete(f"{GROUPS}{made.json()['id']}/")

    assert (made.status_code, changed.status_code, deleted.status_code) == (201, 200, 204)
    assert not AffinityGroup.objects.exists()


def test_a_cluster_admin_of_another_cluster_does_not_see_the_group(
    make_cluster, cluster_admin, group_of
):
    group = group_of(make_cluster())
    client = cluster_admin(make_cluster())

    listed = client.get(GROUPS)
    shown = client.get(f"{GROUPS}{group.pk}/")
    changed = client.patch(f"{GROUPS}{group.pk}/", {"vm_rule": "positive"})
    deleted = client.delete(f"{GROUPS}{group.pk}/")

    assert listed.json()["count"] == 0
    assert (shown.status_code, changed.status_code, deleted.status_code) == (404, 404, 404)
    group.refresh_from_db()
    assert group.vm_rule == "negative"


def test_a_cluster_admin_cannot_make_a_group_in_another_cluster(make_cluster, cluster_admin):
    client = cluster_admin(make_cluster())
    other = make_cluster()

    response = client.post(GROUPS, {"cluster": other.pk, "name": "g"})

    assert response.status_code == 400
    assert "cluster" in response.json()
    assert not AffinityGroup.objects.exists()


def test_a_user_who_sees_the_cluster_but_may_not_add_groups_gets_403(
    make_cluster, make_user, grant, client_for
):
    cluster = make_cluster()
    user = make_user()
    grant(user, "PowerUser", cluster)

    response = client_for(user).post(GROUPS, {"cluster": cluster.pk, "name": "g"})

    assert response.status_code == 403
    assert not AffinityGroup.objects.exists()


def test_a_vm_manager_cannot_see_the_groups_of_its_vms_cluster(
    make_cluster, vm_in, make_user, grant, client_for, group_of
):
    cluster = make_cluster()
    vm = vm_in(cluster)
    group = group_of(cluster, vm)
    user = make_user()
    grant(user, "UserVmManager", vm)

    response = client_for(user).get(f"{GROUPS}{group.pk}/")

    assert response.status_code == 404


def test_a_group_stays_in_its_cluster(cluster_with, vm_in, admin_user, client_for, group_of):
    cluster, _ = cluster_with(hosts=1)
    elsewhere, _ = cluster_with(hosts=1)
    member = vm_in(cluster)
    group = group_of(cluster, member)

    response = client_for(admin_user).patch(f"{GROUPS}{group.pk}/", {"cluster": elsewhere.pk})

    assert response.status_code == 200
    assert response.json()["cluster"] == cluster.pk
    group.refresh_from_db()
    assert (group.cluster, list(group.vms.all())) == (cluster, [member])
