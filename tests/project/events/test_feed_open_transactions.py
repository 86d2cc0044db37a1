"""The event feed on PostgreSQL while transactions overlap: an event id is taken at insert, so a
transaction still open (a host sync writing thousands of VMs) holds an id below events others
have committed since. Readers wait for it instead of passing it; none is ever lost.

Asked of ``project.asgi:application`` (``client_for``): readers of the process's event hub, as a
deployment's. Once the open transaction commits, the hub reads its events within moments: the
polls after it may wait for them."""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings
from django.db import connection, transaction
from rest_framework.test import APIClient

from hosts.models import VirtualMachine
from project import events
from project.models import EventKind
from tests.project.events.test_event_feed import Reader, _feed, _vm_event

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
        reason="ids commit out of order only with concurrent writers; SQLite has a single writer",
    ),
]


def _one(vm) -> list:
    return [_vm_event(vm, "long 1")]


def _bulk(vm) -> list:
    row = dict(kind=EventKind.CHANGED, object_type="vm", object_id=vm.pk, data={}, vm_id=vm.pk)
    return events.emit_many([{**row, "message": f"long {n}"} for n in (1, 2, 3)])


class OpenTransaction(threading.Thread):
    """Emits events in a transaction on its own connection and stays open until ``finish()``."""

    def __init__(self, emit):
        super().__init__(daemon=True)
        self.emit = emit
        self.emitted: list = []
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._finish = threading.Event()

    def __enter__(self) -> OpenTransaction:
        return self.begin()

    def begin(self) -> OpenTransaction:
        """Start it and return once it has emitted (its transaction still open)."""
        self.start()
        assert self._ready.wait(30), "the open transaction never emitted"
        if self.error:
            raise self.error
        return self

    def __exit__(self, *exc) -> None:
        self.finish()

    def finish(self) -> None:
        self._finish.set()
        self.join(30)
        assert not self.is_alive(), "the open transaction never committed"

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.emitted = self.emit()
                self._ready.set()
                self._finish.wait(60)
        except BaseException as exc:
            self.error = exc
        finally:
            self._ready.set()
            connection.close()


def _read_around_an_open_transaction(client, vm, emit):
    """What a reader gets while a transaction holding an older event is open, then after it
    committed: (start, while_open, after, the open transaction's events, the newer event)."""
    start = _feed(client, since=0)["token"]

    with OpenTransaction(lambda: emit(vm)) as long:
        short = _vm_event(vm, "short")  # commits at once, with a higher id
        assert short.pk > long.emitted[-1].pk

        while_open = _feed(client, since=start)

    after = _feed(client, since=while_open["token"], timeout=10)
    return start, while_open, after, long.emitted, short


@pytest.mark.parametrize("emit", [_one, _bulk], ids=["emit", "emit_many"])
def test_a_reader_does_not_pass_an_event_of_a_transaction_still_open(
    make_vm, admin_user, client_for, emit
):
    start, while_open, after, emitted, short = _read_around_an_open_transaction(
        client_for(admin_user), make_vm(), emit
    )

    # From the event hub, the token may move up to the open transaction's event, never past it
    # (the WSGI fallback keeps the token it was given, below).
    assert while_open["events"] == []
    assert start <= while_open["token"] < emitted[0].pk
    assert [e["message"] for e in after["events"]] == [e.message for e in emitted] + ["short"]
    assert [e["id"] for e in after["events"]] == sorted(e["id"] for e in after["events"])
    assert after["token"] == short.pk


@pytest.mark.parametrize("emit", [_one, _bulk], ids=["emit", "emit_many"])
def test_under_wsgi_a_reader_does_not_pass_an_event_of_a_transaction_still_open(
    make_vm, admin_user, emit
):
    """The fallback of a WSGI server (and of Django's test client): the view reads the feed."""
    client = APIClient()
    client.force_authenticate(admin_user)
    start, while_open, after, emitted, short = _read_around_an_open_transaction(
        client, make_vm(), emit
    )

    assert while_open == {"token": start, "events": []}
    assert [e["message"] for e in after["events"]] == [e.message for e in emitted] + ["short"]
    assert [e["id"] for e in after["events"]] == sorted(e["id"] for e in after["events"])
    assert after["token"] == short.pk


def test_a_transaction_that_began_first_but_emits_last_does_not_hide_the_open_one(
    make_vm, admin_user, client_for
):
    # Which transaction began (wrote) first says nothing about which took the lower event id.
    vm = make_vm()
    client = client_for(admin_user)
    start = _feed(client, since=0)["token"]

    with transaction.atomic():
        VirtualMachine.objects.filter(pk=vm.pk).update(name=vm.name)  # takes its xid now
        long = OpenTransaction(lambda: _one(vm)).begin()
        short = _vm_event(vm, "short")
    try:
        while_open = _feed(client, since=start)
    finally:
        long.finish()
    after = _feed(client, since=start, timeout=10)

    assert short.pk > long.emitted[0].pk
    # From the event hub, the token may move up to the open transaction's event, never past it
    # (the WSGI fallback keeps the token it was given, below).
    assert while_open["events"] == []
    assert start <= while_open["token"] < long.emitted[0].pk
    assert [e["id"] for e in after["events"]] == [long.emitted[0].pk, short.pk]


def test_under_wsgi_a_transaction_that_began_first_but_emits_last_does_not_hide_the_open_one(
    make_vm, admin_user
):
    """The fallback of a WSGI server (and of Django's test client): the view reads the feed."""
    # Which transaction began (wrote) first says nothing about which took the lower event id.
    vm = make_vm()
    client = APIClient()
    client.force_authenticate(admin_user)
    start = _feed(client, since=0)["token"]

    with transaction.atomic():
        VirtualMachine.objects.filter(pk=vm.pk).update(name=vm.name)  # takes its xid now
        long = OpenTransaction(lambda: _one(vm)).begin()
        short = _vm_event(vm, "short")
    try:
        while_open = _feed(client, since=start)
    finally:
        long.finish()
    after = _feed(client, since=start)

    assert short.pk > long.emitted[0].pk
    assert while_open == {"token": start, "events": []}
    assert [e["id"] for e in after["events"]] == [long.emitted[0].pk, short.pk]


def test_a_waiting_reader_gets_both_events_in_order_when_the_older_transaction_commits(
    make_vm, admin_user, client_for
):
    vm = make_vm()
    start = _feed(client_for(admin_user), since=0)["token"]
    reader = Reader(client_for(admin_user), start, timeout=30)

    with OpenTransaction(lambda: _one(vm)) as long:
        reader.start()
        time.sleep(0.5)
        short = _vm_event(vm, "short")  # its NOTIFY wakes the reader, which must not answer
        time.sleep(1)
        assert reader.is_alive(), f"answered while an older event was pending: {reader.answer}"
    reader.join(30)

    assert [e["id"] for e in reader.answer["events"]] == [long.emitted[0].pk, short.pk]
    assert reader.answer["token"] == short.pk
    assert reader.seconds < 20  # woken by the commit, not by its timeout


def _stream(browser, **headers) -> str:
    with browser.get("/events/stream/", headers=headers, stream=True) as response:
        assert response.status_code == 200
        return "".join(response.iter_content(chunk_size=None, decode_unicode=True))


def test_the_event_stream_starts_below_an_event_still_to_commit(
    settings, asgi_app, make_vm, admin_user
):
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.3
    vm = make_vm()
    _vm_event(vm, "seen before")
    browser = asgi_app.client(admin_user, credential="session")

    with OpenTransaction(lambda: _one(vm)) as long:
        short = _vm_event(vm, "short")
        opened = _stream(browser)
        resume_from = opened.split("\n\n")[0].splitlines()[1].removeprefix("id: ")
    settings.CORRAL_EVENT_STREAM_SECONDS = 3  # long enough for the hub to read both events
    resumed = _stream(browser, **{"Last-Event-ID": resume_from})

    assert int(resume_from) < long.emitted[0].pk
    assert "event: change" not in opened
    ids = [int(line[4:]) for line in resumed.splitlines() if line.startswith("id: ")][1:]
    assert ids == [long.emitted[0].pk, short.pk]
