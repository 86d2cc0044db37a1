"""Pruning the event feed: events past the retention go, newer ones and tokens keep working."""

from datetime import timedelta

import pytest
from django.utils import timezone

from project import events
from project.models import Event
from tests.project.events.test_event_feed import _feed, _vm_event

pytestmark = pytest.mark.django_db


def _age(event, hours: float) -> None:
    Event.objects.filter(pk=event.pk).update(created_at=timezone.now() - timedelta(hours=hours))


def test_pruning_deletes_only_events_older_than_the_retention(
    settings, make_vm, admin_user, client_for
):
    settings.CORRAL_EVENT_RETENTION_HOURS = 2
    vm = make_vm()
    old, older = _vm_event(vm, "old"), _vm_event(vm, "older")
    recent, fresh = _vm_event(vm, "recent"), _vm_event(vm, "fresh")
    _age(old, 3)
    _age(older, 30)
    _age(recent, 1.5)

    deleted = events.prune()

    assert deleted == 2
    assert list(Event.objects.values_list("message", flat=True)) == ["recent", "fresh"]
    # A reader whose token points into what was pruned goes on from there.
    answer = _feed(client_for(admin_user), since=old.pk)
    assert [e["message"] for e in answer["events"]] == ["recent", "fresh"]
    assert answer["token"] == fresh.pk


def test_pruning_with_an_explicit_age_overrides_the_retention(settings, make_vm):
    settings.CORRAL_EVENT_RETENTION_HOURS = 48
    vm = make_vm()
    stale, kept = _vm_event(vm, "stale"), _vm_event(vm, "kept")
    _age(stale, 2)

    assert events.prune(older_than=timedelta(hours=1)) == 1
    assert events.prune() == 0
    assert list(Event.objects.values_list("pk", flat=True)) == [kept.pk]
