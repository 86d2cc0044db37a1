"""Live updates through the ASGI server of `make serve` (a real process on the test database):
concurrent streams of users with different grants, resuming, resync, long polls, and many open
streams leaving the API answering on one worker."""

from __future__ import annotations

import socket
import threading
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from project import events
from project.access.tokens import issue as issue_token
from project.models import Event, EventKind
from tests.project.fixtures import StreamReader, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def _vm_event(vm, message: str) -> Event:
    return events.emit(
        EventKind.CHANGED, "vm", vm.pk, message, vm_id=vm.pk, cluster_id=vm.cluster_id
    )


def _open(server, user, last_event_id: int | None = None) -> StreamReader:
    reader = StreamReader(f"{server.url}/events/stream/", session_cookie(user), last_event_id)
    reader.start()
    assert reader.opened.wait(30), "the stream never opened"
    assert reader.error is None, reader.error
    return reader


def _finish(reader: StreamReader) -> list[str]:
    reader.join(60)
    assert not reader.is_alive(), "the stream did not end"
    assert reader.error is None, reader.error
    return [change["message"] for change in reader.changes]


def test_concurrent_streams_carry_each_user_what_they_may_see_and_nothing_else(
    asgi_server, make_vm, make_host, make_user, grant
):
    server = asgi_server(CORRAL_EVENT_STREAM_SECONDS=3)
    vm_a, vm_b = make_vm(), make_vm()
    alice, bob, root = make_user(), make_user(), make_user(superuser=True)
    grant(alice, "UserRole", vm_a)
    grant(bob, "UserRole", vm_b)
    host = make_host(cluster=vm_a.cluster)
    streams = {
        "alice": [_open(server, alice) for _ in range(3)],
        "bob": [_open(server, bob) for _ in range(2)],
        "root": [_open(server, root)],
    }

    _vm_event(vm_a, "a changed")
    _vm_event(vm_b, "b changed")
    events.alert("host", host.pk, "host down", cluster_id=host.cluster_id)

    seen = {name: [_finish(reader) for reader in readers] for name, readers in streams.items()}
    assert seen == {
        "alice": [["a changed"]] * 3,
        "bob": [["b changed"]] * 2,
        "root": [["a changed", "b changed", "host down"]],
    }


def test_a_browser_reconnecting_from_its_last_event_id_misses_nothing(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(CORRAL_EVENT_STREAM_SECONDS=1.5)
    mine, theirs = make_vm(), make_vm()
    user = make_user()
    grant(user, "UserRole", mine)
    sent = []

    first = _open(server, user)
    for n in range(5):
        sent.append(_vm_event(mine, f"during the first stream {n}").message)
        _vm_event(theirs, "not for this user")
    got = _finish(first)
    for n in range(5):
        sent.append(_vm_event(mine, f"between the streams {n}").message)
        _vm_event(theirs, "not for this user")
    second = _open(server, user, last_event_id=first.last_id)
    for n in range(5):
        sent.append(_vm_event(mine, f"during the second stream {n}").message)
    got += _finish(second)

    assert got == sent
    assert not any(block.get("event") == "resync" for block in first.blocks + second.blocks)


def test_a_resume_point_older_than_the_feed_gets_a_resync_signal_then_what_is_left(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(CORRAL_EVENT_STREAM_SECONDS=1)
    vm = make_vm()
    user = make_user()
    grant(user, "UserRole", vm)
    seen_last = _vm_event(vm, "the last one this browser saw")
    _vm_event(vm, "pruned before the browser came back")
    _vm_event(vm, "kept")
    Event.objects.exclude(message="kept").update(created_at=timezone.now() - timedelta(days=3))
    events.prune()
    token = issue_token(user)[1]

    stream = _open(server, user, last_event_id=seen_last.pk)
    poll = requests.get(
        f"{server.url}/api/events/",
        params={"since": seen_last.pk},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    ).json()

    assert _finish(stream) == ["kept"]
    assert stream.blocks[0] == {"event": "resync", "data": "{}"}
    assert poll["resync"] is True
    assert [event["message"] for event in poll["events"]] == ["kept"]


def test_a_long_poll_is_answered_by_the_first_event_the_user_may_see(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server()
    mine, theirs = make_vm(), make_vm()
    user = make_user()
    grant(user, "UserRole", mine)
    token = issue_token(user)[1]
    since = events.latest_token()
    answer = {}

    def poll():
        answer.update(
            requests.get(
                f"{server.url}/api/events/",
                params={"since": since, "timeout": 30},
                headers={"Authorization": f"Token {token}"},
                timeout=60,
            ).json()
        )

    poller = threading.Thread(target=poll)
    poller.start()
    _vm_event(theirs, "not for this user")
    visible = _vm_event(mine, "for this user")
    poller.join(60)

    assert [event["message"] for event in answer["events"]] == ["for this user"]
    assert answer["token"] == visible.pk
    assert "resync" not in answer


def _open_raw_stream(server, cookie: dict[str, str]) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    cookies = "; ".join(f"{name}={value}" for name, value in cookie.items())
    sock.sendall(
        f"GET /events/stream/ HTTP/1.1\r\nHost: {host}:{port}\r\nCookie: {cookies}\r\n\r\n".encode()
    )
    head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return sock


def test_two_hundred_open_streams_leave_the_api_answering_on_one_worker(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(workers=1, CORRAL_EVENT_STREAM_SECONDS=120)
    vm = make_vm()
    users = [make_user() for _ in range(20)]
    for user in users:
        grant(user, "UserRole", vm)
    cookies = [session_cookie(user) for user in users]
    token = issue_token(users[0])[1]
    streams = [_open_raw_stream(server, cookies[n % len(cookies)]) for n in range(200)]
    try:
        me = requests.get(
            f"{server.url}/api/me/", headers={"Authorization": f"Token {token}"}, timeout=10
        )
        assert me.status_code == 200
        assert me.json()["username"] == users[0].username

        _vm_event(vm, "everyone sees this")
        for sock in streams:
            received = b""
            while b"everyone sees this" not in received:
                chunk = sock.recv(65536)
                assert chunk, "a stream closed before the event"
                received += chunk
    finally:
        for sock in streams:
            sock.close()
