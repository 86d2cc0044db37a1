"""Where a browser resumes the portal's event stream when a response ended before any event
(asked of ``project.asgi:application`` with a session cookie, the stream read as it comes)."""

from __future__ import annotations

from project import events
from project.models import EventKind


def test_a_stream_without_events_still_tells_the_browser_where_to_resume(
    settings, asgi_app, make_vm, make_user, grant
):
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.3
    vm = make_vm()
    user = make_user()
    grant(user, "UserRole", vm)
    events.emit(EventKind.CHANGED, "vm", vm.pk, "before the page opened", vm_id=vm.pk)
    since = events.latest_token()
    client = asgi_app.client(user, credential="session")

    with client.get("/events/stream/", stream=True) as response:
        body = "".join(response.iter_content(chunk_size=None, decode_unicode=True))

    first = body.split("\n\n")[0].splitlines()
    assert f"id: {since}" in first
    assert "event: change" not in body
