"""The portal's live updates: server-sent events built on the event feed.

Asked as a browser asks, with its session cookie, of ``project.asgi:application``
(``asgi_app``): the first stream of the process through Django, the next ones answered at the
ASGI layer from the event hub (project/live/asgi.py). The stream is read as it comes. One test
asks the WSGI fallback (the feed's blocking reads).
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from project import events
from project.models import EventKind


def _changes(body: str) -> list[dict]:
    found = []
    for block in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines.get("event") == "change":
            found.append({"id": int(lines["id"]), **json.loads(lines["data"])})
    return found


def _read(client, url: str, **headers) -> list[dict]:
    with client.get(url, headers=headers, stream=True) as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        body = "".join(response.iter_content(chunk_size=None, decode_unicode=True))
    return _changes(body)


@pytest.fixture
def short_streams(settings):
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.5


def test_the_stream_carries_the_events_about_the_users_vms_and_no_others(
    short_streams, asgi_app, make_vm, make_user, grant
):
    mine, theirs = make_vm(), make_vm()
    user = make_user()
    grant(user, "UserRole", mine)
    since = events.latest_token()
    events.emit(EventKind.CHANGED, "vm", theirs.pk, "theirs changed", vm_id=theirs.pk)
    events.emit(EventKind.CHANGED, "vm", mine.pk, "mine changed", vm_id=mine.pk)
    client = asgi_app.client(user, credential="session")

    received = _read(client, f"/events/stream/?since={since}")

    assert [(e["type"], e["object"], e["message"]) for e in received] == [
        ("vm", mine.pk, "mine changed")
    ]


def test_a_reconnecting_browser_resumes_after_the_last_event_it_saw(
    short_streams, asgi_app, make_vm, make_user, grant
):
    vm = make_vm()
    user = make_user()
    grant(user, "UserRole", vm)
    first = events.emit(EventKind.CHANGED, "vm", vm.pk, "one", vm_id=vm.pk)
    events.emit(EventKind.CHANGED, "vm", vm.pk, "two", vm_id=vm.pk)
    client = asgi_app.client(user, credential="session")

    received = _read(client, "/events/stream/", **{"Last-Event-ID": str(first.pk)})

    assert [e["message"] for e in received] == ["two"]


def test_the_stream_needs_a_login_and_a_numeric_resume_point(short_streams, asgi_app, make_user):
    assert asgi_app.client().get("/events/stream/").status_code == 302
    client = asgi_app.client(make_user(), credential="session")
    response = client.get("/events/stream/", headers={"Last-Event-ID": "abc"})
    assert response.status_code == 400


@pytest.mark.django_db
def test_under_wsgi_the_stream_carries_the_events_about_the_users_vms_and_no_others(
    short_streams, make_vm, make_user, grant
):
    """The fallback of a WSGI server (and of Django's test client): no event hub, the stream
    reads the feed."""
    mine, theirs = make_vm(), make_vm()
    user = make_user()
    grant(user, "UserRole", mine)
    since = events.latest_token()
    events.emit(EventKind.CHANGED, "vm", theirs.pk, "theirs changed", vm_id=theirs.pk)
    events.emit(EventKind.CHANGED, "vm", mine.pk, "mine changed", vm_id=mine.pk)
    client = Client()
    client.force_login(user)

    response = client.get(f"/events/stream/?since={since}")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    received = _changes(b"".join(response.streaming_content).decode())
    assert [(e["type"], e["object"], e["message"]) for e in received] == [
        ("vm", mine.pk, "mine changed")
    ]
