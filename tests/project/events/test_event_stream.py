"""The portal's live updates: server-sent events built on the event feed."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from project import events
from project.models import EventKind

pytestmark = pytest.mark.django_db


def _read(client: Client, url: str, **headers) -> list[dict]:
    response = client.get(url, **headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    body = b"".join(response.streaming_content).decode()
    found = []
    for block in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines.get("event") == "change":
            found.append({"id": int(lines["id"]), **json.loads(lines["data"])})
    return found


@pytest.fixture
def short_streams(settings):
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.5


def test_the_stream_carries_the_events_about_the_users_vms_and_no_others(
    short_streams, make_vm, make_user, grant
):
    mine, theirs = make_vm(), make_vm()
    user = make_user()
    grant(user, "UserRole", mine)
    since = events.latest_token()
    events.emit(EventKind.CHANGED, "vm", theirs.pk, "theirs changed", vm_id=theirs.pk)
    events.emit(EventKind.CHANGED, "vm", mine.pk, "mine changed", vm_id=mine.pk)
    client = Client()
    client.force_login(user)

    received = _read(client, f"/events/stream/?since={since}")

    assert [(e["type"], e["object"], e["message"]) for e in received] == [
        ("vm", mine.pk, "mine changed")
    ]


def test_a_reconnecting_browser_resumes_after_the_last_event_it_saw(
    short_streams, make_vm, make_user, grant
):
    vm = make_vm()
    user = make_user()
    grant(user, "UserRole", vm)
    first = events.emit(EventKind.CHANGED, "vm", vm.pk, "one", vm_id=vm.pk)
    events.emit(EventKind.CHANGED, "vm", vm.pk, "two", vm_id=vm.pk)
    client = Client()
    client.force_login(user)

    received = _read(client, "/events/stream/", HTTP_LAST_EVENT_ID=str(first.pk))

    assert [e["message"] for e in received] == ["two"]


def test_the_stream_needs_a_login_and_a_numeric_resume_point(short_streams, make_user):
    assert Client().get("/events/stream/").status_code == 302
    client = Client()
    client.force_login(make_user())
    response = client.get("/events/stream/", HTTP_LAST_EVENT_ID="abc")
    assert response.status_code == 400
