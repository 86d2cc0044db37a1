"""Where a browser resumes the portal's event stream when a response ended before any event."""

from __future__ import annotations

import pytest
from django.test import Client

from project import events
from project.models import EventKind

pytestmark = pytest.mark.django_db


def test_a_stream_without_events_still_tells_the_browser_where_to_resume(
    settings, make_vm, make_user, grant
):
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.3
    vm = make_vm()
    user = make_user()
    grant(user, "UserRole", vm)
    events.emit(EventKind.CHANGED, "vm", vm.pk, "before the page opened", vm_id=vm.pk)
    since = events.latest_token()
    client = Client()
    client.force_login(user)

    body = b"".join(client.get("/events/stream/").streaming_content).decode()

    first = body.split("\n\n")[0].splitlines()
    assert f"id: {since}" in first
    assert "event: change" not in body
