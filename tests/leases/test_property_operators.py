"""Host properties with Blazar's operators (==, !=, <, <=, >, >=, in): numbers compare as numbers
(whether typed as numbers or as text), text as text, ``in`` against a list; a host without the
property never matches. Properties stored before operators existed keep their meaning."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from leases.api.fields import parse_properties
from leases.models import Reservation
from leases.properties import expression, matches
from openstack.blazar.presenters import reservation_view
from tests.leases.fixtures import at, instances, whole_hosts

pytestmark = pytest.mark.django_db


class Host:
    """A host as matches() reads it."""

    def __init__(self, cpus=16, memory_mb=3072, **capabilities):
        self.cpus, self.memory_mb, self.capabilities = cpus, memory_mb, capabilities


def asks(text: str) -> dict:
    return parse_properties(text, "resource_properties")


@pytest.mark.parametrize(
    "text, stored",
    [
        ('[">=", "$vcpus", "16"]', {"cpus": 16}),
        ('["==", "$vcpus", "16"]', {"cpus": {"==": 16}}),
        ('["<=", "$memory_mb", "4096"]', {"memory_mb": {"<=": 4096}}),
        ('["==", "$gpu", "a100"]', {"gpu": "a100"}),
        ('["!=", "$gpu", "t4"]', {"gpu": {"!=": "t4"}}),
        ('["in", "$gpu", ["a100", "h100"]]', {"gpu": {"in": ["a100", "h100"]}}),
        (
            '["and", [">", "$ram_gb", "64"], ["<=", "$ram_gb", 256]]',
            {"ram_gb": {">": "64", "<=": 256}},
        ),
    ],
)
def test_blazar_expressions_are_stored_by_property_and_operator(text, stored):
    assert asks(text) == stored


def test_an_object_of_operators_is_taken_as_it_is_stored():
    value = {"cpus": {">=": "8", "<": 64}, "zone": {"in": ["a", "b"]}, "gpu": "a100"}

    assert parse_properties(value, "host_properties") == {
        "cpus": {">=": 8, "<": 64},
        "zone": {"in": ["a", "b"]},
        "gpu": "a100",
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ('["and", ["==", "$gpu", "a"], ["==", "$gpu", "b"]]', "'gpu': == is given twice."),
        ('["in", "$gpu", "a100"]', "'gpu': in takes a list of 1 to 100 values."),
        ('["<", "$vcpus", "many"]', "cpus needs a whole number."),
        (
            '["=~", "$gpu", "a.*"]',
            "Unsupported expression ['=~', '$gpu', 'a.*']: use and of terms with ==, !=, <, <=, "
            ">, >= or in.",
        ),
    ],
)
def test_a_bad_term_is_a_field_error(text, message):
    with pytest.raises(Exception) as refused:
        asks(text)
    assert refused.value.detail == {"resource_properties": [message]}


@pytest.mark.parametrize(
    "text, host, wanted",
    [
        # Numbers as numbers, however they were typed: 10 > 9, "128" > "64".
        ('[">", "$ram_gb", "9"]', Host(ram_gb=10), True),
        ('[">", "$ram_gb", "64"]', Host(ram_gb="128"), True),
        ('["<", "$ram_gb", "64"]', Host(ram_gb="128"), False),
        ('["==", "$count", "2"]', Host(count=2), True),
        ('["==", "$count", "2.0"]', Host(count=2), True),
        ('["<=", "$memory_mb", "4096"]', Host(memory_mb=3072), True),
        ('["<=", "$memory_mb", "2048"]', Host(memory_mb=3072), False),
        ('["==", "$vcpus", "16"]', Host(cpus=16), True),
        ('["==", "$vcpus", "8"]', Host(cpus=16), False),
        # Text as text.
        ('["<", "$zone", "m"]', Host(zone="eu-1"), True),
        ('["<", "$zone", "m"]', Host(zone="us-1"), False),
        ('["!=", "$gpu", "t4"]', Host(gpu="a100"), True),
        ('["!=", "$gpu", "t4"]', Host(gpu="t4"), False),
        # A number and text are never equal, nor ordered.
        ('["==", "$rack", "r7"]', Host(rack=7), False),
        ('[">", "$rack", "r7"]', Host(rack=7), False),
        ('["!=", "$rack", "r7"]', Host(rack=7), True),
        # true and false, as JSON or as text.
        ('["==", "$ssd", true]', Host(ssd=True), True),
        ('["==", "$ssd", "True"]', Host(ssd=True), True),
        ('["==", "$ssd", "false"]', Host(ssd=True), False),
        # in: any of a list.
        ('["in", "$gpu", ["a100", "h100"]]', Host(gpu="h100"), True),
        ('["in", "$gpu", ["a100", "h100"]]', Host(gpu="t4"), False),
        ('["in", "$vcpus", ["8", "16"]]', Host(cpus=16), True),
        # A host without the property matches no term about it.
        ('["!=", "$gpu", "t4"]', Host(), False),
        ('["<", "$ram_gb", "64"]', Host(), False),
    ],
)
def test_a_host_matches_by_the_kind_of_its_values(text, host, wanted):
    assert matches(host, asks(text)) is wanted


def test_the_planner_chooses_hosts_by_operator(reservable_hosts, make_lease):
    reservable_hosts(1, capabilities={"ram_gb": "64"})
    [large] = reservable_hosts(1, capabilities={"ram_gb": "512"})
    reservable_hosts(1, capabilities={"ram_gb": 2048})

    lease = make_lease(
        at(9),
        at(10),
        whole_hosts(1, ram_gb={">": "100", "<=": 1024}),
    )

    assert list(lease.reservations.get().allocations.values_list("host", flat=True)) == [large.pk]


@pytest.mark.parametrize(
    "text",
    [
        '["and", [">=", "$vcpus", "8"], ["<", "$vcpus", "64"]]',
        '["in", "$gpu", ["a100", "h100"]]',
        '["and", ["!=", "$gpu", "t4"], ["<=", "$memory_mb", "65536"], [">", "$ram_gb", 64]]',
    ],
)
def test_blazar_shows_an_expression_that_reads_back_the_same(text):
    stored = asks(text)

    assert asks(expression(stored)) == stored


def test_a_lease_made_with_operators_reads_back_in_both_apis(
    client_for, lease_user, reservable_hosts
):
    reservable_hosts(1, cpus=32, capabilities={"gpu": "h100"})
    owner = lease_user()
    request = {key: value for key, value in instances(1).items() if key != "host_properties"}
    body = {
        "name": "ops",
        "start_date": f"{at(9):%Y-%m-%d %H:%M}",
        "end_date": f"{at(10):%Y-%m-%d %H:%M}",
        "reservations": [
            {
                **request,
                "hypervisor_properties": '["and", [">=", "$vcpus", "16"], ["<", "$vcpus", 64]]',
                "resource_properties": '["in", "$gpu", ["a100", "h100"]]',
            }
        ],
    }

    created = client_for(owner).post("/api/leases/", body, format="json")

    assert created.status_code == 201, created.json()
    [reservation] = created.json()["reservations"]
    assert reservation["host_properties"] == {
        "cpus": {">=": 16, "<": 64},
        "gpu": {"in": ["a100", "h100"]},
    }
    stored = Reservation.objects.select_related("lease").get(pk=reservation["id"])
    # Blazar's instance reservations carry every property in resource_properties.
    blazar = reservation_view(stored, stored.lease)["resource_properties"]
    assert blazar == (
        '["and", ["<", "$vcpus", "64"], [">=", "$vcpus", "16"], ["in", "$gpu", ["a100", "h100"]]]'
    )
    assert parse_properties(blazar, "resource_properties") == stored.host_properties


# -- leases stored before operators ----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_properties_stored_before_operators_keep_their_meaning_through_the_migration(
    reservable_hosts,
):
    """Migrate back to before the migration that brought operators, store a reservation the
    old way, migrate forward: it plans, matches and reads back as it did."""
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    ours = next(
        key
        for key in graph.nodes
        if key[0] == "leases" and key[1].endswith("_missing_capacity_and_property_operators")
    )
    before = next(parent for parent in graph.node_map[ours].parents if parent.key[0] == "leases")
    latest = executor.loader.graph.leaf_nodes("leases")
    [host] = reservable_hosts(1, cpus=16, capabilities={"gpu": "a100"})
    try:
        executor.migrate([before.key])
        old = executor.loader.project_state([before.key]).apps
        Lease = old.get_model("leases", "Lease")
        lease = Lease.objects.create(
            name="old",
            owner_id=_user_id(),
            start_date=at(9),
            end_date=at(10),
        )
        reservation = old.get_model("leases", "Reservation").objects.create(
            lease=lease,
            resource_type="physical:host",
            min=1,
            max=1,
            host_properties={"cpus": 8, "gpu": "a100"},
        )
        old.get_model("leases", "Allocation").objects.create(
            reservation=reservation, host_id=host.pk, whole_host=True
        )
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    finally:
        MigrationExecutor(connection).migrate(latest)

    stored = Reservation.objects.get(pk=reservation.pk)
    assert stored.host_properties == {"cpus": 8, "gpu": "a100"}
    assert (stored.missing, stored.missing_since) == (0, None)
    stored.full_clean()
    assert matches(host, stored.host_properties)
    view = reservation_view(stored, stored.lease)
    assert (view["hypervisor_properties"], view["resource_properties"]) == (
        '[">=", "$vcpus", "8"]',
        '["==", "$gpu", "a100"]',
    )


def _user_id() -> int:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("old-owner").pk
