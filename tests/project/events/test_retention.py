"""Retention of the event feed as time passes: what is pruned is always the oldest part of
the feed, the newest event stays, and a reader whose point was pruned is told to resync."""

from datetime import timedelta

import pytest
from django.utils import timezone

from project import events, loops
from project.models import Event
from tests.project.events.test_event_feed import _vm_event

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(time_machine):
    time_machine.move_to(timezone.now(), tick=False)  # time passes only when shifted
    return time_machine


def test_the_loop_prunes_events_past_the_retention_and_readers_behind_it_must_resync(
    settings, clock, make_vm
):
    settings.CORRAL_EVENT_RETENTION_HOURS = 2
    vm = make_vm()
    first, second = _vm_event(vm, "first"), _vm_event(vm, "second")
    clock.shift(timedelta(hours=3))
    third, fourth = _vm_event(vm, "third"), _vm_event(vm, "fourth")

    loops.get("prune-events").run()

    assert list(Event.objects.values_list("message", flat=True)) == ["third", "fourth"]
    assert Event.objects.order_by("id").first().pk == third.pk
    assert events.older_than_the_feed(first.pk)  # "second" is gone: resync
    assert not events.older_than_the_feed(second.pk)  # next is "third": nothing missed
    assert not events.older_than_the_feed(fourth.pk)


def test_the_newest_event_is_kept_however_old_so_a_reader_at_the_head_resumes(
    settings, clock, make_vm
):
    settings.CORRAL_EVENT_RETENTION_HOURS = 2
    vm = make_vm()
    _vm_event(vm, "old")
    last = _vm_event(vm, "last")
    clock.shift(timedelta(days=3))

    assert events.prune() == 1

    assert list(Event.objects.values_list("pk", flat=True)) == [last.pk]
    assert not events.older_than_the_feed(last.pk)
    newer = _vm_event(vm, "newer")
    assert not events.older_than_the_feed(last.pk)
    assert Event.objects.order_by("id").first().pk == last.pk < newer.pk


def test_an_old_event_after_a_recent_one_is_not_pruned_out_of_order(settings, clock, make_vm):
    settings.CORRAL_EVENT_RETENTION_HOURS = 2
    vm = make_vm()
    before = _vm_event(vm, "before")
    old = _vm_event(vm, "old")
    clock.shift(timedelta(hours=3))
    recent = _vm_event(vm, "recent")
    late = _vm_event(vm, "late")
    # Committed after "recent" but stamped as old (a long transaction): pruning keeps a prefix.
    Event.objects.filter(pk=late.pk).update(created_at=timezone.now() - timedelta(hours=5))

    assert events.prune() == 2

    assert list(Event.objects.values_list("pk", flat=True)) == [recent.pk, late.pk]
    assert events.older_than_the_feed(before.pk)  # "old" is gone: resync
    assert not events.older_than_the_feed(old.pk)


def test_an_empty_feed_asks_no_one_to_resync():
    assert not Event.objects.exists()
    assert events.prune() == 0
    assert not events.older_than_the_feed(0)
