"""The live readers' cheap check (scope keys on events, keys from grants on readers) lets each
user see exactly the events the feed's permission query lets them see."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from project import events
from project.live import event_scopes
from project.models import Event, EventKind

pytestmark = pytest.mark.django_db


def _seen_by_keys(user) -> list[int]:
    keys = event_scopes.reader_keys(user, events.VIEW_ACTIONS)
    return [
        event.pk
        for event in Event.objects.order_by("id")
        if event_scopes.sees(keys, event.object_type, event.scope_keys)
    ]


def _seen_by_query(user) -> list[int]:
    return list(events.visible_events(user).order_by("id").values_list("id", flat=True))


def test_scope_keys_show_each_user_what_the_permission_query_shows(
    make_cluster, make_vm, make_pool, make_user, grant
):
    here, there = make_cluster(), make_cluster()
    vm_here, vm_there = make_vm(cluster=here), make_vm(cluster=there)
    pool = make_pool(cluster=here)
    group = Group.objects.create(name="vm-there-users")
    users = {
        "vm user": make_user(),
        "cluster admin": make_user(),
        "pool user": make_user(),
        "pool admin": make_user(),
        "group member": make_user(),
        "system power user": make_user(),
        "nobody": make_user(),
        "inactive": make_user(is_active=False),
        "superuser": make_user(superuser=True),
    }
    grant(users["vm user"], "UserRole", vm_here)
    grant(users["cluster admin"], "ClusterAdmin", here)
    grant(users["pool user"], "UserRole", pool)
    grant(users["pool admin"], "ClusterAdmin", pool)
    grant(group, "UserRole", vm_there)
    users["group member"].groups.add(group)
    grant(users["system power user"], "PowerUser")
    grant(users["inactive"], "ClusterAdmin", here)
    places = [
        {"vm_id": vm_here.pk, "cluster_id": here.pk, "pool_id": pool.pk},
        {"vm_id": vm_there.pk, "cluster_id": there.pk},
        {"cluster_id": here.pk},
        {"cluster_id": there.pk, "pool_id": pool.pk},
        {"pool_id": pool.pk},
        {},
        {"user_id": users["pool user"].pk},
        {"vm_id": vm_there.pk, "user_id": users["vm user"].pk},
    ]
    for object_type in [*events.VIEW_ACTIONS, "unregistered"]:
        for place in places:
            events.emit(EventKind.CHANGED, object_type, 1, f"{object_type} {place}", **place)

    for name, user in users.items():
        seen = _seen_by_keys(user)
        assert seen == _seen_by_query(user), name
        if name == "superuser":
            assert len(seen) == Event.objects.count()
    assert _seen_by_keys(users["nobody"]) == []
    assert _seen_by_keys(users["vm user"]) != []
