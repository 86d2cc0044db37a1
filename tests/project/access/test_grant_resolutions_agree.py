"""Grants are resolved three ways, one answer: over random users, groups, roles and grants,
every user may act on the same objects whichever way is asked.

- ``project.access.permissions``: ``restrict()`` for a list (one query), ``holds()`` for one object,
  ``held_actions()`` for everything held on a scope object (what granting checks);
- ``project.access.row_permissions.holds_sql``: the same answer as a column of the row's own query;
- ``project.live.event_scopes``: the keys a live reader holds against the keys on each event,
  which must show the events ``events.visible_events`` shows.

Each round builds a random inventory and random grants from a seeded generator (set
CORRAL_GRANT_SEED to replay other rounds); a failure names the round, the user and the grants.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.models import BooleanField, Model
from django.db.models.expressions import RawSQL

from hosts.models import Cluster, Host, Image, Template, VirtualMachine
from leases.models import Lease, Reservation
from pools.models import VmPool
from project import events
from project.access import scopes
from project.access.grants import grant_role
from project.access.permissions import (
    held_actions,
    holds,
    restrict,
    scope_paths,
    shared_scopes,
)
from project.access.roles import ensure_grant_permissions
from project.access.row_permissions import holds_sql
from project.live import event_scopes
from project.models import Event, EventKind, Role, System
from tests.conftest import unique

pytestmark = pytest.mark.django_db

SEED = int(os.environ.get("CORRAL_GRANT_SEED", "1129"))
ROUNDS = int(os.environ.get("CORRAL_GRANT_ROUNDS", "8"))

# The models whose rows grants reach, checked for every action stored for them.
MODELS = [Cluster, Host, Template, Image, VmPool, VirtualMachine, Lease, Reservation]


@dataclass
class World:
    """One round's objects, people and grants."""

    scope_objects: list[Model] = field(default_factory=list)
    users: dict[str, object] = field(default_factory=dict)
    grants: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # The actions checked on each model this round.
    actions: dict[type[Model], list[str]] = field(default_factory=dict)


def actions_of(model: type[Model]) -> list[str]:
    """Every action stored for ``model`` (its default ones and those it declares)."""
    permissions = Permission.objects.filter(
        content_type__app_label=model._meta.app_label, content_type__model=model._meta.model_name
    ).exclude(codename__startswith="role_")
    return sorted(f"{model._meta.app_label}.{p.codename}" for p in permissions)


def make_world(rng: random.Random, round_number: int) -> World:
    world = World(actions={model: some_actions(rng, model) for model in MODELS})
    clusters = [Cluster.objects.create(name=unique("cluster")) for _ in range(2)]
    for cluster in clusters:
        name = unique("host")
        Host.objects.create(cluster=cluster, name=name, uri=f"qemu+ssh://{name}/system")
    templates = [
        Template.objects.create(name=unique("tmpl")),  # shared by every cluster
        Template.objects.create(name=unique("tmpl"), cluster=rng.choice(clusters)),
    ]
    for cluster in (None, rng.choice(clusters)):  # one shared by every cluster, like templates
        name = unique("image")
        Image.objects.create(
            name=name,
            cluster=cluster,
            kind="disk",
            format="raw",
            size_bytes=1,
            virtual_size_bytes=1,
            sha256="0" * 64,
            file=f"image-{name}",
        )
    pools = [
        VmPool.objects.create(
            name=unique("pool"), cluster=rng.choice(clusters), template=templates[0]
        )
        for _ in range(rng.randint(1, 3))
    ]
    people = [f"user{n}" for n in range(4)]
    for name in people:
        world.users[name] = _user(name, round_number)
    world.users["inactive"] = _user("inactive", round_number, is_active=False)
    world.users["superuser"] = _user("superuser", round_number, is_superuser=True)
    leases = [
        Lease.objects.create(
            name=unique("lease"),
            owner=world.users[rng.choice(people)],
            start_date="2030-01-01T00:00Z",
            end_date="2030-01-02T00:00Z",
        )
        for _ in range(2)
    ]
    reservations = [
        Reservation.objects.create(
            lease=lease, resource_type="virtual:instance", vcpus=1, memory_mb=128, amount=1
        )
        for lease in leases
    ]
    vms = []
    for _ in range(rng.randint(2, 5)):
        cluster = rng.choice(clusters)
        in_cluster = [pool for pool in pools if pool.cluster_id == cluster.pk]
        vms.append(
            VirtualMachine.objects.create(
                name=unique("vm"),
                cluster=cluster,
                template=templates[0],
                vcpus=1,
                memory_mb=128,
                disk_gb=1,
                pool=rng.choice([None, *in_cluster]),
                reservation=rng.choice([None, *reservations]),
            )
        )
    world.scope_objects = [System.get(), *clusters, *pools, *leases, *vms]

    groups = [Group.objects.create(name=unique("group")) for _ in range(2)]
    for group in groups:
        group.user_set.add(*(world.users[name] for name in rng.sample(people, rng.randint(0, 3))))
    group_of_inactive = rng.choice(groups)
    group_of_inactive.user_set.add(world.users["inactive"])

    roles = list(Role.objects.all())
    # Custom roles mostly of the actions the checks ask about, so that they matter.
    choosable = [action for model in MODELS for action in world.actions[model]]
    choosable += ["pools.change_vmpool", "project.manage_grants"]
    for _ in range(2):
        role = Role.objects.create(name=unique("Custom"))
        picked = rng.sample(choosable, rng.randint(1, 6))
        role.actions.set(
            Permission.objects.get(content_type__app_label=label, codename=codename)
            for label, _, codename in (action.partition(".") for action in picked)
        )
        ensure_grant_permissions(role)
        roles.append(role)

    # A scope first, then an object of it: the narrow scopes are drawn as often as the System.
    by_scope: dict[str, list[Model]] = {}
    for obj in world.scope_objects:
        by_scope.setdefault(scopes.of_model(type(obj)), []).append(obj)
    people_and_groups = [*(world.users[name] for name in people), *groups]
    principals = [*people_and_groups] * 4 + [world.users["inactive"], world.users["superuser"]]
    for _ in range(rng.randint(6, 16)):
        principal, role = rng.choice(principals), rng.choice(roles)
        target = rng.choice(by_scope[rng.choice(sorted(by_scope))])
        to = {"group": principal} if isinstance(principal, Group) else {"user": principal}
        grant_role(role, target, **to)
        world.grants.append(f"{role.name} on {target!r} to {principal}")

    # An event about each object, with the scope keys its app writes, and about another kind
    # of object at the same place (a job of a VM); some concern a user.
    places = [({}, "policyunit"), *(({"cluster_id": c.pk}, "cluster") for c in clusters)]
    places += [({"pool_id": p.pk, "cluster_id": p.cluster_id}, "pool") for p in pools]
    places += [({"lease_id": lease.pk}, "lease") for lease in leases]
    for vm in vms:
        place = {"vm_id": vm.pk, "cluster_id": vm.cluster_id, "pool_id": vm.pool_id}
        if vm.reservation_id is not None:
            place["lease_id"] = vm.reservation.lease_id
        places.append(({key: value for key, value in place.items() if value is not None}, "vm"))
    object_types = [*events.VIEW_ACTIONS, "unregistered"]
    for place, object_type in places:
        for kind in (object_type, rng.choice(object_types)):
            concerns = rng.choice([{}, {"user_id": rng.choice(list(world.users.values())).pk}])
            events.emit(EventKind.CHANGED, kind, 1, "", **place, **concerns)
    world.events = list(Event.objects.order_by("id"))
    return world


def _user(name: str, round_number: int, **extra):
    return get_user_model().objects.create(username=f"{name}-r{round_number}", **extra)


def sql_paths_only(model: type[Model]) -> bool:
    """Whether ``holds_sql`` serves ``model``: every scope path is a column of its own table."""
    return all("__" not in path for paths in scope_paths(model).values() for path in paths)


def allowed_by_sql(model: type[Model], user, action: str) -> set:
    table = connection.ops.quote_name(model._meta.db_table)
    column = RawSQL(*holds_sql(model, user, action, table), BooleanField())
    return set(
        model.objects.annotate(allowed=column).filter(allowed=True).values_list("pk", flat=True)
    )


def some_actions(rng: random.Random, model: type[Model]) -> list[str]:
    """The view action and one other of ``model``'s, drawn anew each round (all of them, over
    the rounds, at a cost a round can afford)."""
    actions = actions_of(model)
    view = f"{model._meta.app_label}.view_{model._meta.model_name}"
    others = [action for action in actions if action != view]
    return [view, *rng.sample(others, min(1, len(others)))]


def check_rows(world: World, user, who: str, max_queries) -> None:
    for model in MODELS:
        all_rows = model.objects.all()
        rows = list(all_rows)
        for action in world.actions[model]:
            with max_queries(1):
                listed = set(
                    restrict(model.objects.all(), user, action).values_list("pk", flat=True)
                )
            one_by_one = {row.pk for row in rows if holds(user, action, row)}
            context = f"{who}: {action} on {model.__name__}"
            assert listed == one_by_one, context
            if sql_paths_only(model) and not shared_scopes(model, action):
                with max_queries(1):
                    in_sql = allowed_by_sql(model, user, action)
                assert in_sql == listed, context


def check_scope_objects(world: World, user, who: str, max_queries) -> None:
    """What ``held_actions`` says of each scope object, ``holds`` says of each action there."""
    if user.is_superuser:
        return  # held_actions reads grants only; granting lets a superuser through before it
    for obj in world.scope_objects:
        model = type(obj)
        with max_queries(2):
            held = held_actions(user, obj)
        for action in world.actions.get(model, actions_of(model)):
            assert (action in held) == holds(user, action, obj), f"{who}: {action} on {obj!r}"


def check_events(world: World, user, who: str, max_queries) -> None:
    by_query = set(events.visible_events(user).values_list("pk", flat=True))
    with max_queries(3):
        keys = event_scopes.reader_keys(user, events.VIEW_ACTIONS)
    by_keys = {e.pk for e in world.events if event_scopes.sees(keys, e.object_type, e.scope_keys)}
    assert by_keys == by_query, who

    def visible(event: Event) -> bool:
        if user.is_superuser or event.user_id == user.pk:
            return True
        action = events.VIEW_ACTIONS.get(event.object_type)
        return action is not None and holds(user, action, event)

    assert {e.pk for e in world.events if visible(e)} == by_query, who

    by_sql = {e.pk for e in world.events if user.is_superuser or e.user_id == user.pk}
    for object_type, action in events.VIEW_ACTIONS.items():
        by_sql |= allowed_by_sql(Event, user, action) & {
            e.pk for e in world.events if e.object_type == object_type
        }
    assert by_sql == by_query, who


@pytest.mark.parametrize("round_number", range(ROUNDS))
def test_every_resolution_of_random_grants_gives_each_user_the_same_answer(
    round_number, django_assert_max_num_queries, settings
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    rng = random.Random(f"{SEED}-{round_number}")
    world = make_world(rng, round_number)
    for name in scopes.names():
        scopes.content_type(name)  # cached, as in a running process

    for name, user in world.users.items():
        who = f"round {round_number} (seed {SEED}), {name}, grants:\n  " + "\n  ".join(world.grants)
        check_rows(world, user, who, django_assert_max_num_queries)
        check_scope_objects(world, user, who, django_assert_max_num_queries)
        check_events(world, user, who, django_assert_max_num_queries)
