"""The policies API: built-in locked policies, clones, their filters, weights and balancer,
property rules, the cluster's choice of policy, policy units, and who may do what."""

import pytest

from hosts.models import Cluster
from scheduling import registry
from scheduling.models import Policy, PolicyFilter, PolicyUnit, PolicyWeight

POLICIES = "/api/schedulingpolicies/"
UNITS = "/api/schedulingpolicyunits/"


def policy_url(policy, part: str = "") -> str:
    pk = policy if isinstance(policy, int) else policy.pk
    return f"{POLICIES}{pk}/{part + '/' if part else ''}"


@pytest.fixture
def admin(admin_user, client_for):
    return client_for(admin_user)


@pytest.fixture
def clone_of(admin):
    """clone_of("evenly_distributed", name=None) -> the clone as the API shows it (by a
    superuser)."""

    def clone(builtin: str, name: str | None = None) -> dict:
        source = Policy.objects.get(name=builtin)
        response = admin.post(policy_url(source, "clone"), {"name": name or f"my-{builtin}"})
        assert response.status_code == 201, response.json()
        return response.json()

    return clone


@pytest.fixture
def policy_admin(make_user, grant, client_for):
    """policy_admin(*clusters) -> a client for a user holding PolicyAdmin on those clusters."""

    def make(*clusters):
        user = make_user()
        for cluster in clusters:
            grant(user, "PolicyAdmin", cluster)
        return client_for(user)

    return make


# -- built-in policies -----------------------------------------------------------------------


def test_the_built_in_policies_are_listed_locked_with_none_as_the_default(admin):
    response = admin.get(POLICIES, {"limit": 100})

    assert response.status_code == 200
    shown = {row["name"]: row for row in response.json()["results"]}
    builtins = ["evenly_distributed", "none", "power_saving", "vm_evenly_distributed"]
    assert set(builtins) <= set(shown)
    assert all(shown[name]["locked"] for name in builtins)
    assert [name for name in builtins if shown[name]["is_default"]] == ["none"]


@pytest.mark.parametrize(
    ("name", "properties", "balance"),
    [
        ("none", {}, "None"),
        (
            "evenly_distributed",
            {"HighUtilization": 80, "CpuOverCommitDurationMinutes": 2},
            "OptimalForEvenDistributionBalance",
        ),
        (
            "power_saving",
            {"HighUtilization": 80, "LowUtilization": 20, "CpuOverCommitDurationMinutes": 2},
            "OptimalForPowerSavingBalance",
        ),
        (
            "vm_evenly_distributed",
            {"HighVmCount": 10, "MigrationThreshold": 5, "SpmVmGrace": 5},
            "OptimalForEvenGuestDistribution",
        ),
    ],
)
def test_each_built_in_policy_carries_ovirts_defaults(admin, name, properties, balance):
    policy = Policy.objects.get(name=name)

    shown = admin.get(policy_url(policy)).json()

    assert shown["properties"] == properties
    assert shown["balance"] == balance
    first, last = shown["filters"][0], shown["filters"][-1]
    assert (first["unit"], first["position"]) == ("HostStatus", "first")
    assert (last["unit"], last["position"]) == ("VmAffinityGroups", "last")


def test_anyone_signed_in_may_read_the_policies(make_user, client_for):
    response = client_for(make_user()).get(POLICIES)

    assert response.status_code == 200
    assert response.json()["count"] >= 4


def test_a_policy_names_only_the_clusters_using_it_that_the_caller_may_see(
    clone_of, policy_admin, make_cluster
):
    copy = clone_of("none")
    mine = make_cluster(policy_id=copy["id"])
    make_cluster(policy_id=copy["id"])
    client = policy_admin(mine)

    listed = client.get(POLICIES, {"limit": 100}).json()["results"]
    shown = client.get(policy_url(copy["id"])).json()

    assert next(row for row in listed if row["id"] == copy["id"])["clusters"] == [mine.pk]
    assert shown["clusters"] == [mine.pk]


def test_policies_are_not_shown_to_anonymous_callers(client_for):
    assert client_for(None).get(POLICIES).status_code == 401


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("put", {"name": "none", "description": "changed", "properties": {}}),
        ("patch", {"description": "changed"}),
        ("delete", None),
    ],
)
def test_a_locked_policy_cannot_be_changed_or_deleted(admin, method, body):
    policy = Policy.objects.get(name="none")

    response = getattr(admin, method)(policy_url(policy), body)

    assert response.status_code == 403
    assert "locked" in response.json()["detail"]
    policy.refresh_from_db()
    assert policy.description != "changed"


@pytest.mark.parametrize(
    ("part", "body"),
    [
        ("filters", {"unit": "CPUOverloaded"}),
        ("weights", {"unit": "OptimalForEvenDistribution", "factor": 2}),
    ],
)
def test_a_locked_policy_takes_no_new_filter_or_weight(admin, part, body):
    policy = Policy.objects.get(name="none")
    before = (policy.filters.count(), policy.weights.count())

    response = admin.post(policy_url(policy, part), body)

    assert response.status_code == 403
    assert (policy.filters.count(), policy.weights.count()) == before


def test_a_locked_policy_keeps_its_filters_and_balancer(admin):
    policy = Policy.objects.get(name="evenly_distributed")
    first = policy.filters.first()

    removed_filter = admin.delete(policy_url(policy, "filters") + f"{first.pk}/")
    removed_balance = admin.delete(policy_url(policy, "balances") + f"{policy.balance_id}/")

    assert (removed_filter.status_code, removed_balance.status_code) == (403, 403)
    assert PolicyFilter.objects.filter(pk=first.pk).exists()
    assert Policy.objects.get(pk=policy.pk).balance_id == policy.balance_id


# -- clones ----------------------------------------------------------------------------------


def test_a_clone_is_an_unlocked_copy_with_the_same_units(clone_of):
    source = Policy.objects.get(name="evenly_distributed")

    copy = clone_of("evenly_distributed", name="spread")

    assert (copy["name"], copy["locked"], copy["is_default"]) == ("spread", False, False)
    assert copy["properties"] == source.properties
    assert copy["balance"] == "OptimalForEvenDistributionBalance"
    assert [(f["unit"], f["position"]) for f in copy["filters"]] == [
        (f.unit.name, {-1: "first", 0: "no_order", 1: "last"}[f.position])
        for f in source.filters.order_by("position", "id")
    ]
    assert sorted((w["unit"], w["factor"]) for w in copy["weights"]) == sorted(
        (w.unit.name, w.factor) for w in source.weights.all()
    )


def test_a_clone_needs_a_name_not_taken(admin, clone_of):
    clone_of("none", name="taken")

    response = admin.post(policy_url(Policy.objects.get(name="none"), "clone"), {"name": "taken"})

    assert response.status_code == 400
    assert "name" in response.json()
    assert Policy.objects.filter(name="taken").count() == 1


# -- filters, weights, balancer --------------------------------------------------------------


@pytest.mark.parametrize("position", ["first", "last", "no_order"])
def test_a_filter_is_added_at_the_position_asked(admin, clone_of, position):
    copy = clone_of("none")

    response = admin.post(
        policy_url(copy["id"], "filters"), {"unit": "CPUOverloaded", "position": position}
    )

    assert response.status_code == 201
    assert response.json()["position"] == position
    shown = admin.get(policy_url(copy["id"])).json()["filters"]
    assert {"id": response.json()["id"], "unit": "CPUOverloaded", "position": position} in shown


def test_a_filter_is_removed_from_a_policy(admin, clone_of):
    copy = clone_of("none")
    memory = next(f for f in copy["filters"] if f["unit"] == "Memory")

    response = admin.delete(policy_url(copy["id"], "filters") + f"{memory['id']}/")

    assert response.status_code == 204
    units = [f["unit"] for f in admin.get(policy_url(copy["id"])).json()["filters"]]
    assert "Memory" not in units
    assert "Memory" in [
        f["unit"] for f in admin.get(policy_url(Policy.objects.get(name="none"))).json()["filters"]
    ]


def test_a_filter_already_in_the_policy_is_a_conflict(admin, clone_of):
    copy = clone_of("none")

    response = admin.post(policy_url(copy["id"], "filters"), {"unit": "Memory"})

    assert response.status_code == 409
    assert PolicyFilter.objects.filter(policy_id=copy["id"], unit__name="Memory").count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"unit": "OptimalForEvenDistribution"}, "unit"),
        ({"unit": "NoSuchUnit"}, "unit"),
        ({"unit": "CPUOverloaded", "position": "middle"}, "position"),
    ],
)
def test_a_filter_must_be_a_filter_unit_at_a_known_position(admin, clone_of, body, field):
    copy = clone_of("none")

    response = admin.post(policy_url(copy["id"], "filters"), body)

    assert response.status_code == 400
    assert field in response.json()


def test_a_weight_is_added_with_its_factor_and_removed(admin, clone_of):
    copy = clone_of("none")

    added = admin.post(
        policy_url(copy["id"], "weights"), {"unit": "OptimalForEvenDistribution", "factor": 3}
    )
    removed = admin.delete(policy_url(copy["id"], "weights") + f"{added.json()['id']}/")

    assert added.status_code == 201
    assert added.json()["factor"] == 3
    assert removed.status_code == 204
    assert not PolicyWeight.objects.filter(pk=added.json()["id"]).exists()


@pytest.mark.parametrize("factor", [0, -1])
def test_a_weight_factor_below_one_is_refused(admin, clone_of, factor):
    copy = clone_of("none")

    response = admin.post(
        policy_url(copy["id"], "weights"),
        {"unit": "OptimalForEvenDistribution", "factor": factor},
    )

    assert response.status_code == 400
    assert "factor" in response.json()
    assert not PolicyWeight.objects.filter(
        policy_id=copy["id"], unit__name="OptimalForEvenDistribution"
    ).exists()


def test_a_filter_unit_is_not_a_weight(admin, clone_of):
    copy = clone_of("none")

    response = admin.post(policy_url(copy["id"], "weights"), {"unit": "Memory"})

    assert response.status_code == 400
    assert "unit" in response.json()


def test_a_policy_has_at_most_one_balancer(admin, clone_of):
    copy = clone_of("evenly_distributed")

    response = admin.post(
        policy_url(copy["id"], "balances"), {"unit": "OptimalForPowerSavingBalance"}
    )

    assert response.status_code == 409
    assert Policy.objects.get(pk=copy["id"]).balance.name == "OptimalForEvenDistributionBalance"


def test_a_balancer_is_replaced_by_removing_it_first(admin, clone_of):
    copy = clone_of("evenly_distributed")
    balancer = PolicyUnit.objects.get(name="OptimalForEvenDistributionBalance")
    power = PolicyUnit.objects.get(name="OptimalForPowerSavingBalance")

    removed = admin.delete(policy_url(copy["id"], "balances") + f"{balancer.pk}/")
    added = admin.post(policy_url(copy["id"], "balances"), {"unit": power.name})

    assert (removed.status_code, added.status_code) == (204, 201)
    assert admin.get(policy_url(copy["id"], "balances")).json() == [
        {"id": power.pk, "unit": "OptimalForPowerSavingBalance"}
    ]


def test_a_balancer_must_be_a_balance_unit(admin, clone_of):
    copy = clone_of("evenly_distributed")
    admin.delete(
        policy_url(copy["id"], "balances") + f"{Policy.objects.get(pk=copy['id']).balance_id}/"
    )

    response = admin.post(policy_url(copy["id"], "balances"), {"unit": "Memory"})

    assert response.status_code == 400
    assert Policy.objects.get(pk=copy["id"]).balance is None


# -- properties ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builtin", "values", "message"),
    [
        ("evenly_distributed", {"HighUtilization": 49}, "HighUtilization must be at least 50"),
        ("evenly_distributed", {"HighUtilization": 100}, "HighUtilization must be at most 99"),
        ("power_saving", {"LowUtilization": 50}, "LowUtilization must be at most 49"),
        ("power_saving", {"LowUtilization": -1}, "LowUtilization must be at least 0"),
        (
            "vm_evenly_distributed",
            {"MigrationThreshold": 1},
            "MigrationThreshold must be at least 2",
        ),
        (
            "evenly_distributed",
            {"HighUtilization": "high"},
            "HighUtilization must be a whole number",
        ),
        ("evenly_distributed", {"Colour": 1}, "Unknown property 'Colour'"),
        ("evenly_distributed", {"MigrationThreshold": 3}, "Unknown property 'MigrationThreshold'"),
    ],
)
def test_a_property_outside_its_rule_is_refused_naming_it(
    admin, clone_of, builtin, values, message
):
    copy = clone_of(builtin)

    response = admin.patch(policy_url(copy["id"]), {"properties": values})

    assert response.status_code == 400
    assert any(message in text for text in response.json()["properties"])
    assert Policy.objects.get(pk=copy["id"]).properties == copy["properties"]


@pytest.mark.parametrize(
    ("builtin", "values"),
    [
        ("evenly_distributed", {"HighUtilization": 50, "CpuOverCommitDurationMinutes": 1}),
        ("evenly_distributed", {"HighUtilization": 99}),
        ("power_saving", {"LowUtilization": 0, "HighUtilization": 70}),
        ("power_saving", {"LowUtilization": 49}),
        ("vm_evenly_distributed", {"MigrationThreshold": 2, "HighVmCount": 0}),
    ],
)
def test_a_property_inside_its_rule_is_kept(admin, clone_of, builtin, values):
    copy = clone_of(builtin)

    response = admin.patch(policy_url(copy["id"]), {"properties": values})

    assert response.status_code == 200, response.json()
    assert response.json()["properties"] == values
    assert Policy.objects.get(pk=copy["id"]).properties == values


def test_a_new_policy_may_only_name_properties_some_unit_takes(admin):
    refused = admin.post(POLICIES, {"name": "fresh", "properties": {"Colour": "blue"}})
    made = admin.post(POLICIES, {"name": "fresh", "properties": {"HighUtilization": 70}})

    assert refused.status_code == 400
    assert made.status_code == 201
    assert (made.json()["locked"], made.json()["filters"]) == (False, [])


# -- the cluster's policy --------------------------------------------------------------------


def test_a_cluster_takes_a_policy_and_property_overrides(admin, make_cluster):
    cluster = make_cluster()
    spread = Policy.objects.get(name="evenly_distributed")

    response = admin.patch(
        f"/api/clusters/{cluster.pk}/",
        {"policy": spread.pk, "policy_properties": {"HighUtilization": 90}},
    )

    assert response.status_code == 200
    assert (response.json()["policy"], response.json()["policy_properties"]) == (
        spread.pk,
        {"HighUtilization": 90},
    )
    cluster.refresh_from_db()
    assert (cluster.policy, cluster.policy_properties) == (spread, {"HighUtilization": 90})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"HighUtilization": 20}, "HighUtilization must be at least 50"),
        ({"CpuOverCommitDurationMinutes": 0}, "CpuOverCommitDurationMinutes must be at least 1"),
        ({"LowUtilization": 10}, "Unknown property 'LowUtilization'"),
    ],
)
def test_cluster_property_overrides_follow_the_rules_of_its_policy(
    admin, make_cluster, values, message
):
    cluster = make_cluster(policy=Policy.objects.get(name="evenly_distributed"))

    response = admin.patch(f"/api/clusters/{cluster.pk}/", {"policy_properties": values})

    assert response.status_code == 400
    assert any(message in text for text in response.json()["policy_properties"])
    assert Cluster.objects.get(pk=cluster.pk).policy_properties == {}


def test_a_cluster_on_the_default_policy_takes_its_rules(admin, make_cluster):
    cluster = make_cluster()

    response = admin.patch(
        f"/api/clusters/{cluster.pk}/", {"policy_properties": {"HighUtilization": 90}}
    )

    assert response.status_code == 400
    assert "Unknown property 'HighUtilization'" in response.json()["policy_properties"][0]


def test_a_policy_in_use_by_a_cluster_cannot_be_deleted(admin, clone_of, make_cluster):
    copy = clone_of("none")
    make_cluster(policy_id=copy["id"])

    response = admin.delete(policy_url(copy["id"]))

    assert response.status_code == 409
    assert Policy.objects.filter(pk=copy["id"]).exists()


def test_an_unused_policy_is_deleted_with_its_units(admin, clone_of):
    copy = clone_of("none")

    response = admin.delete(policy_url(copy["id"]))

    assert response.status_code == 204
    assert not Policy.objects.filter(pk=copy["id"]).exists()
    assert not PolicyFilter.objects.filter(policy_id=copy["id"]).exists()


def test_the_default_policy_is_chosen_system_wide(admin, clone_of, policy_admin, make_cluster):
    copy = clone_of("none")
    scoped = policy_admin(make_cluster())

    refused = scoped.post(policy_url(copy["id"], "make-default"))
    made = admin.post(policy_url(copy["id"], "make-default"))

    assert refused.status_code == 403
    assert made.status_code == 200
    assert list(Policy.objects.filter(is_default=True).values_list("pk", flat=True)) == [copy["id"]]


# -- who may do what -------------------------------------------------------------------------


def test_a_cluster_policy_admin_may_create_and_clone_policies(policy_admin, make_cluster):
    client = policy_admin(make_cluster())

    made = client.post(POLICIES, {"name": "mine"})
    cloned = client.post(
        policy_url(Policy.objects.get(name="power_saving"), "clone"), {"name": "saver"}
    )

    assert (made.status_code, cloned.status_code) == (201, 201)
    assert Policy.objects.filter(name__in=["mine", "saver"], locked=False).count() == 2


@pytest.mark.parametrize("role", [None, "ClusterAdmin", "PowerUser"])
def test_a_user_without_policy_admin_cannot_create_or_clone_policies(
    make_user, grant, client_for, make_cluster, role
):
    user = make_user()
    if role:
        grant(user, role, make_cluster())
    client = client_for(user)

    made = client.post(POLICIES, {"name": "mine"})
    cloned = client.post(policy_url(Policy.objects.get(name="none"), "clone"), {"name": "copy"})

    assert (made.status_code, cloned.status_code) == (403, 403)
    assert not Policy.objects.filter(name__in=["mine", "copy"]).exists()


def test_changing_a_policy_used_by_two_clusters_needs_policy_admin_on_both(
    clone_of, policy_admin, make_cluster
):
    copy = clone_of("evenly_distributed")
    first = make_cluster(policy_id=copy["id"])
    second = make_cluster(policy_id=copy["id"])
    on_one = policy_admin(first)
    on_both = policy_admin(first, second)
    change = {"properties": {"HighUtilization": 70}}

    refused = on_one.patch(policy_url(copy["id"]), change)
    refused_filter = on_one.post(policy_url(copy["id"], "filters"), {"unit": "PinToHost"})
    allowed = on_both.patch(policy_url(copy["id"]), change)

    assert (refused.status_code, refused_filter.status_code) == (403, 403)
    assert "every cluster" in refused.json()["detail"]
    assert allowed.status_code == 200
    assert Policy.objects.get(pk=copy["id"]).properties["HighUtilization"] == 70


def test_a_policy_admin_may_set_their_clusters_policy_but_not_delete_the_cluster(
    policy_admin, make_cluster
):
    cluster = make_cluster()
    client = policy_admin(cluster)
    saver = Policy.objects.get(name="power_saving")

    changed = client.patch(f"/api/clusters/{cluster.pk}/", {"policy": saver.pk})
    deleted = client.delete(f"/api/clusters/{cluster.pk}/")

    assert (changed.status_code, deleted.status_code) == (200, 403)
    assert Cluster.objects.get(pk=cluster.pk).policy == saver


def test_a_policy_admin_of_one_cluster_cannot_see_another_cluster(policy_admin, make_cluster):
    mine, other = make_cluster(), make_cluster()
    client = policy_admin(mine)

    response = client.patch(
        f"/api/clusters/{other.pk}/", {"policy": Policy.objects.get(name="power_saving").pk}
    )

    assert response.status_code == 404
    assert Cluster.objects.get(pk=other.pk).policy is None


def test_a_user_without_change_cluster_cannot_set_a_clusters_policy(
    make_user, grant, client_for, make_cluster
):
    cluster = make_cluster()
    user = make_user()
    grant(user, "PowerUser", cluster)

    response = client_for(user).patch(
        f"/api/clusters/{cluster.pk}/", {"policy": Policy.objects.get(name="power_saving").pk}
    )

    assert response.status_code == 403
    assert Cluster.objects.get(pk=cluster.pk).policy is None


# -- policy units ----------------------------------------------------------------------------


@pytest.fixture
def user_unit(db, settings):
    settings.CORRAL_SCHEDULING_UNITS = ["tests.scheduling.user_units.PreferNamedHost"]
    registry.sync_units()
    return PolicyUnit.objects.get(name="PreferNamedHost")


def test_policy_units_are_listed_with_their_kinds_and_properties(make_user, client_for):
    response = client_for(make_user()).get(UNITS, {"limit": 100})

    assert response.status_code == 200
    shown = {row["name"]: row for row in response.json()["results"]}
    assert shown["Memory"]["kinds"] == ["filter"]
    assert shown["VmAffinityGroups"]["kinds"] == ["filter", "weight"]
    assert shown["OptimalForEvenGuestDistribution"]["kinds"] == ["weight", "balance"]
    assert shown["None"]["kinds"] == ["balance"]
    assert shown["CPUOverloaded"]["properties"]["HighUtilization"] == {
        "default": 80,
        "description": "CPU load (%) above which a host is over-utilized",
        "minimum": 50,
        "maximum": 99,
    }
    assert all(row["internal"] for row in shown.values())


def test_policy_units_are_filtered_by_kind(admin):
    response = admin.get(UNITS, {"is_balance": "true", "limit": 100})

    names = {row["name"] for row in response.json()["results"]}
    assert names == {
        "None",
        "OptimalForEvenDistributionBalance",
        "OptimalForPowerSavingBalance",
        "OptimalForEvenGuestDistribution",
    }


def test_a_built_in_unit_cannot_be_deleted(admin):
    unit = PolicyUnit.objects.get(name="Memory")

    response = admin.delete(f"{UNITS}{unit.pk}/")

    assert response.status_code == 403
    assert PolicyUnit.objects.filter(pk=unit.pk).exists()


def test_a_user_written_unit_used_by_a_policy_cannot_be_deleted(admin, user_unit, make_policy):
    make_policy(weights=["PreferNamedHost"])

    response = admin.delete(f"{UNITS}{user_unit.pk}/")

    assert response.status_code == 409
    assert PolicyUnit.objects.filter(pk=user_unit.pk).exists()


def test_an_unused_user_written_unit_is_deleted(admin, user_unit):
    response = admin.delete(f"{UNITS}{user_unit.pk}/")

    assert response.status_code == 204
    assert not PolicyUnit.objects.filter(pk=user_unit.pk).exists()


def test_deleting_a_user_written_unit_needs_a_system_wide_policy_admin(
    user_unit, policy_admin, make_cluster, make_user, grant, client_for
):
    scoped = policy_admin(make_cluster())
    system_user = make_user()
    grant(system_user, "PolicyAdmin")

    refused = scoped.delete(f"{UNITS}{user_unit.pk}/")
    allowed = client_for(system_user).delete(f"{UNITS}{user_unit.pk}/")

    assert (refused.status_code, allowed.status_code) == (403, 204)


# -- enabling, disabling and what a failing filter does ---------------------------------------


def test_a_system_wide_policy_admin_disables_and_enables_a_unit(make_user, grant, client_for):
    unit = PolicyUnit.objects.get(name="Memory")
    admin_of_policies = make_user()
    grant(admin_of_policies, "PolicyAdmin")
    client = client_for(admin_of_policies)

    disabled = client.patch(f"{UNITS}{unit.pk}/", {"enabled": False}, format="json")
    listed = client.get(UNITS, {"enabled": "false", "limit": 100}).json()["results"]
    enabled = client.patch(f"{UNITS}{unit.pk}/", {"enabled": True}, format="json")

    assert disabled.status_code == 200 and disabled.json()["enabled"] is False
    assert [row["name"] for row in listed] == ["Memory"]
    assert enabled.status_code == 200 and enabled.json()["enabled"] is True
    assert PolicyUnit.objects.get(pk=unit.pk).enabled is True


@pytest.mark.parametrize("scope", ["cluster", "none", "cluster-admin"])
def test_changing_a_unit_needs_policy_admin_on_the_whole_system(
    scope, make_user, make_cluster, grant, client_for
):
    unit = PolicyUnit.objects.get(name="Memory")
    user = make_user()
    if scope == "cluster":
        grant(user, "PolicyAdmin", make_cluster())
    elif scope == "cluster-admin":
        grant(user, "ClusterAdmin", make_cluster())

    response = client_for(user).patch(f"{UNITS}{unit.pk}/", {"enabled": False}, format="json")

    assert response.status_code == 403
    assert response.json() == {
        "detail": "Changing a policy unit needs PolicyAdmin on the whole system: every policy "
        "of every cluster may use it."
    }
    assert PolicyUnit.objects.get(pk=unit.pk).enabled is True


def test_only_a_filter_may_drop_hosts_when_it_fails(admin):
    weight = PolicyUnit.objects.get(name="OptimalForEvenMemoryDistribution")
    memory = PolicyUnit.objects.get(name="Memory")

    refused = admin.patch(f"{UNITS}{weight.pk}/", {"on_failure": "drop"}, format="json")
    unknown = admin.patch(f"{UNITS}{memory.pk}/", {"on_failure": "ignore"}, format="json")
    accepted = admin.patch(f"{UNITS}{memory.pk}/", {"on_failure": "drop"}, format="json")

    assert refused.status_code == 400
    assert refused.json() == {
        "on_failure": [
            "OptimalForEvenMemoryDistribution is not a filter: only a filter drops hosts."
        ]
    }
    assert unknown.status_code == 400
    assert unknown.json() == {"on_failure": ['"ignore" is not a valid choice.']}
    assert accepted.status_code == 200 and accepted.json()["on_failure"] == "drop"
    assert PolicyUnit.objects.get(pk=weight.pk).on_failure == "keep"


def test_what_a_unit_is_comes_from_its_code_and_is_not_replaced(admin):
    unit = PolicyUnit.objects.get(name="Memory")

    replaced = admin.put(f"{UNITS}{unit.pk}/", {"enabled": False}, format="json")

    assert replaced.status_code == 405
    assert PolicyUnit.objects.get(pk=unit.pk).enabled is True
