"""The event feed: a token to resume from, only what the reader may see, waiting readers woken.

Asked as scripts ask it, with an API token, of ``project.asgi:application`` (``client_for``): the
first poll of the process through Django, the next ones answered at the ASGI layer from the
event hub (project/live/asgi.py). One test asks the WSGI fallback (the blocking reads).
"""

import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from hosts import jobs, sync
from hosts.models import JobKind
from project import events
from project.models import EventKind


def _feed(client, **params) -> dict:
    response = client.get("/api/events/", params)
    assert response.status_code == 200, response.json()
    return response.json()


def _messages(answer: dict) -> list[str]:
    return [event["message"] for event in answer["events"]]


def _vm_event(vm, message: str):
    return events.emit(
        EventKind.CHANGED,
        "vm",
        vm.pk,
        message,
        {"status": vm.status},
        vm_id=vm.pk,
        cluster_id=vm.cluster_id,
    )


# -- tokens ------------------------------------------------------------------------------------


def test_reading_from_zero_returns_the_events_and_the_last_ones_id_as_token(
    make_vm, admin_user, client_for
):
    vm = make_vm()
    _vm_event(vm, "first")
    last = events.alert("vm", vm.pk, "second", vm_id=vm.pk, cluster_id=vm.cluster_id)

    answer = _feed(client_for(admin_user), since=0)

    assert _messages(answer) == ["first", "second"]
    assert answer["token"] == last.pk
    assert {k: answer["events"][0][k] for k in ("kind", "object_type", "object_id", "data")} == {
        "kind": "changed",
        "object_type": "vm",
        "object_id": vm.pk,
        "data": {"status": "down"},
    }
    assert answer["events"][1]["kind"] == "alert"


def test_reading_since_a_token_returns_only_newer_events(make_vm, admin_user, client_for):
    vm = make_vm()
    client = client_for(admin_user)
    _vm_event(vm, "before")
    token = _feed(client, since=0)["token"]
    newer = _vm_event(vm, "after")

    # Under ASGI the answer comes from the process's event hub, which reads the new event
    # within moments: a poll that may wait gets it then (one that may not could come first).
    answer = _feed(client, since=token, timeout=5)

    assert _messages(answer) == ["after"]
    assert answer["token"] == newer.pk


def test_a_reader_with_nothing_new_gets_no_events_and_keeps_its_token(
    make_vm, admin_user, client_for
):
    _vm_event(make_vm(), "seen")
    client = client_for(admin_user)
    token = _feed(client, since=0)["token"]

    answer = _feed(client, since=token)

    assert answer == {"token": token, "events": []}


# -- who sees what ------------------------------------------------------------------------------


def test_a_user_sees_events_about_their_vms_and_their_own_jobs_only(
    make_vm, make_host, make_user, grant, client_for
):
    user = make_user()
    mine = make_vm()
    other = make_vm(cluster=mine.cluster)
    grant(user, "UserRole", mine)
    sync.vm_changed(mine, "mine changed")
    sync.vm_changed(other, "other changed")
    jobs.submit(JobKind.NOOP, vm=mine)
    jobs.submit(JobKind.NOOP, vm=other, requested_by=user)
    jobs.submit(JobKind.NOOP, vm=other, params={"n": 2})
    host = make_host(cluster=mine.cluster)
    events.alert("host", host.pk, "host alert", cluster_id=host.cluster_id)

    answer = _feed(client_for(user), since=0)

    assert [(e["object_type"], e["message"]) for e in answer["events"]] == [
        ("vm", "mine changed"),
        ("job", "No-op (steps only) requested"),
        ("job", "No-op (steps only) requested"),
    ]
    assert {e["object_id"] for e in answer["events"] if e["object_type"] == "job"} == {
        job.pk for job in mine.jobs.all()
    } | {job.pk for job in other.jobs.filter(requested_by=user)}


def test_a_cluster_admin_sees_host_alerts_of_their_cluster_only(
    make_host, make_user, grant, client_for
):
    admin = make_user()
    theirs, elsewhere = make_host(), make_host()
    grant(admin, "ClusterAdmin", theirs.cluster)
    for host in (theirs, elsewhere):
        events.alert("host", host.pk, f"{host.name} is down", cluster_id=host.cluster_id)

    answer = _feed(client_for(admin), since=0)

    assert _messages(answer) == [f"{theirs.name} is down"]


def test_anonymous_readers_get_401(client_for):
    assert client_for(None).get("/api/events/", {"since": 0}).status_code == 401


@pytest.mark.parametrize(
    "params",
    [
        {"since": "abc"},
        {"since": "-1"},
        {"since": "1.5"},
        {"timeout": "soon"},
        {"timeout": "-1"},
        {"timeout": "61"},
    ],
)
def test_a_bad_since_or_timeout_is_a_400(admin_user, client_for, params):
    response = client_for(admin_user).get("/api/events/", params)

    assert response.status_code == 400
    assert set(response.json()) & {"since", "timeout"}


# -- waiting -----------------------------------------------------------------------------------


class Reader(threading.Thread):
    """A client waiting on the feed in its own thread; records the answer and how long it took."""

    def __init__(self, client, since: int, timeout: float):
        super().__init__(daemon=True)
        self.client, self.since, self.timeout = client, since, timeout
        self.answer: dict | None = None
        self.seconds: float | None = None

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.answer = _feed(self.client, since=self.since, timeout=self.timeout)
        finally:
            self.seconds = time.monotonic() - started
            connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_waiting_reader_is_woken_by_a_new_event_well_before_its_timeout(
    make_vm, admin_user, client_for
):
    vm = make_vm()
    token = _feed(client_for(admin_user), since=0)["token"]
    reader = Reader(client_for(admin_user), token, timeout=5)
    reader.start()
    time.sleep(0.5)

    emitted = _vm_event(vm, "woken")
    reader.join(10)

    assert [event["id"] for event in reader.answer["events"]] == [emitted.pk]
    assert 0.4 < reader.seconds < 3


@pytest.mark.django_db(transaction=True)
def test_a_waiting_reader_is_not_answered_with_events_it_may_not_see(
    make_vm, make_user, grant, client_for
):
    user = make_user()
    mine, other = make_vm(), make_vm()
    grant(user, "UserRole", mine)
    reader = Reader(client_for(user), 0, timeout=1)
    reader.start()
    time.sleep(0.3)

    unseen = _vm_event(other, "not for this reader")
    reader.join(10)

    # From the event hub, the token moves past what the reader may not see: its next poll
    # resumes from there (the WSGI fallback keeps the token it was given, below).
    assert reader.answer == {"token": unseen.pk, "events": []}
    assert reader.seconds >= 0.9


@pytest.mark.django_db(transaction=True)
def test_under_wsgi_a_waiting_reader_is_not_answered_with_events_it_may_not_see(
    make_vm, make_user, grant
):
    """The fallback of a WSGI server (and of Django's test client): no event hub, the view
    waits on the feed's blocking read, and keeps the token it was given."""
    user = make_user()
    mine, other = make_vm(), make_vm()
    grant(user, "UserRole", mine)
    client = APIClient()
    client.force_authenticate(user)
    reader = Reader(client, 0, timeout=1)
    reader.start()
    time.sleep(0.3)

    _vm_event(other, "not for this reader")
    reader.join(10)

    assert reader.answer == {"token": 0, "events": []}
    assert reader.seconds >= 0.9
