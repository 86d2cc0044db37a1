"""Open pages at load on the ASGI server of `make serve` (a real process on the test database),
driven by real HTTP clients (bench/web_load.py: aiohttp, as scripts and browsers hold them):
hundreds of waiting long polls leave the API answering; past the limits a new wait is refused
with Retry-After instead; one LISTEN session per process; and pages that resume after a reload
or a restart miss no event."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import requests
from django.conf import settings
from django.db import connection

from bench.web_load import Page, run_pages
from project import events
from project.access.tokens import issue as issue_token
from project.models import Event, EventKind
from tests.conftest import wait_until
from tests.project.fixtures import session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class Pages(threading.Thread):
    """``pages`` held open against ``url`` on an event loop of their own until ``stop()``."""

    def __init__(self, url: str, pages: list[Page], poll_timeout: float = 20, open_over_s=1.0):
        super().__init__(daemon=True)
        self.pages = pages
        self.spec = {
            "url": url,
            "cookie_name": settings.SESSION_COOKIE_NAME,
            "poll_timeout": poll_timeout,
            "open_over_s": open_over_s,
            "until": time.monotonic() + 600,
        }
        self.stopped = threading.Event()

    def run(self) -> None:
        asyncio.run(run_pages(self.spec, self.pages, self.stopped))

    def stop(self) -> None:
        self.stopped.set()
        self.join(30)
        assert not self.is_alive(), "the clients did not stop"

    def got(self, event: Event) -> list[Page]:
        return [page for page in self.pages if event.pk in page.received]


def _crowd(make_user, grant, vm, users: int) -> tuple[list[str], list[str]]:
    """``users`` users who may see ``vm``: their API tokens and browser session cookies."""
    tokens, cookies = [], []
    for _ in range(users):
        user = make_user()
        grant(user, "UserRole", vm)
        tokens.append(issue_token(user)[1])
        cookies.append(session_cookie(user)[settings.SESSION_COOKIE_NAME])
    return tokens, cookies


def _vm_event(vm, message: str) -> Event:
    event = events.emit(
        EventKind.CHANGED, "vm", vm.pk, message, vm_id=vm.pk, cluster_id=vm.cluster_id
    )
    connection.close()  # the server's readers, not this test, are what is measured
    return event


def _me(url: str, token: str) -> float:
    """Seconds GET /api/me/ took (it must answer 200 within 10 s)."""
    start = time.monotonic()
    response = requests.get(
        f"{url}/api/me/", headers={"Authorization": f"Token {token}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    return time.monotonic() - start


def _wait_for_all(pages: Pages, event: Event, timeout: float = 20) -> None:
    wait_until(
        lambda: len(pages.got(event)) == len(pages.pages) or None,
        timeout=timeout,
        message=lambda: f"{len(pages.got(event))} of {len(pages.pages)} pages got the event",
    )


def test_hundreds_of_waiting_long_polls_leave_the_api_answering_and_all_get_the_event(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(workers=1)
    vm = make_vm()
    tokens, _ = _crowd(make_user, grant, vm, users=15)
    since = events.latest_token()
    pages = Pages(server.url, [Page("poll", tokens[n % 15], since) for n in range(300)])
    pages.start()
    time.sleep(4)  # every poll sent and waiting

    took = [_me(server.url, tokens[n % 15]) for n in range(30)]
    event = _vm_event(vm, "for every poll")
    _wait_for_all(pages, event)
    pages.stop()

    # Each answered well within its 10 s; a waiting poll holds no thread or connection.
    assert max(took) < 5, took
    assert all(page.failures == 0 and not page.refusals for page in pages.pages)


def test_a_user_past_their_limit_of_waits_gets_429_with_retry_after_and_others_are_served(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(workers=1, CORRAL_LIVE_WAITS_PER_USER="4")
    vm = make_vm()
    (greedy, other), (greedy_cookie, _) = _crowd(make_user, grant, vm, users=2)
    since = events.latest_token()
    waiting = Pages(server.url, [Page("poll", greedy, since) for _ in range(4)])
    waiting.start()
    # Probed only once the four have opened (over a second): a probe is a wait too, and one
    # that took a slot while a page opened would send that page into its back-off.
    time.sleep(2)
    wait_until(
        lambda: not _answers_now(server.url, greedy, since) or None, timeout=20, interval=0.5
    )

    poll = requests.get(
        f"{server.url}/api/events/",
        params={"since": since, "timeout": 10},
        headers={"Authorization": f"Token {greedy}"},
        timeout=30,
    )
    stream = requests.get(
        f"{server.url}/events/stream/",
        cookies={settings.SESSION_COOKIE_NAME: greedy_cookie},
        timeout=30,
    )
    theirs = Pages(server.url, [Page("poll", other, since)])
    theirs.start()
    time.sleep(1)
    event = _vm_event(vm, "after the refusals")
    _wait_for_all(theirs, event)
    _wait_for_all(waiting, event)
    theirs.stop()
    waiting.stop()

    assert poll.status_code == 429
    assert poll.headers["Content-Type"] == "application/json"
    assert poll.json()["code"] == "too_many_waits_of_user"
    assert "open pages and long polls" in poll.json()["detail"]
    assert int(poll.headers["Retry-After"]) > 0
    assert stream.status_code == 429
    assert int(stream.headers["Retry-After"]) > 0
    # A poll with something to answer at once waits for nothing: never refused.
    answered = requests.get(
        f"{server.url}/api/events/",
        params={"since": since, "timeout": 10},
        headers={"Authorization": f"Token {greedy}"},
        timeout=30,
    )
    assert answered.status_code == 200
    assert [e["message"] for e in answered.json()["events"]] == ["after the refusals"]


def _answers_now(url: str, token: str, since: int) -> bool:
    """Whether one more poll of ``token``'s user is taken (it is answered at once here)."""
    response = requests.get(
        f"{url}/api/events/",
        params={"since": since, "timeout": 0.1},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    return response.status_code == 200


def test_past_the_process_limit_a_new_wait_gets_503_with_retry_after(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(workers=1, CORRAL_LIVE_WAITS_PER_PROCESS="6")
    vm = make_vm()
    tokens, cookies = _crowd(make_user, grant, vm, users=3)
    since = events.latest_token()
    pages = Pages(
        server.url,
        [Page("poll", tokens[n % 3], since) for n in range(3)]
        + [Page("sse", cookies[n % 3], since) for n in range(3)],
    )
    pages.start()
    wait_until(lambda: all(page.answers or page.kind == "poll" for page in pages.pages) or None)
    time.sleep(1)

    poll = requests.get(
        f"{server.url}/api/events/",
        params={"since": since, "timeout": 10},
        headers={"Authorization": f"Token {tokens[0]}"},
        timeout=30,
    )
    stream = requests.get(
        f"{server.url}/events/stream/",
        cookies={settings.SESSION_COOKIE_NAME: cookies[1]},
        timeout=30,
    )
    took = _me(server.url, tokens[2])
    event = _vm_event(vm, "for the pages held")
    _wait_for_all(pages, event)
    pages.stop()

    assert poll.status_code == 503
    assert poll.json()["code"] == "too_many_waiting"
    assert int(poll.headers["Retry-After"]) > 0
    assert stream.status_code == 503
    assert int(stream.headers["Retry-After"]) > 0
    assert took < 5


def _listening_sessions() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = %s",
            [f"LISTEN {events.CHANNEL}"],
        )
        return {pid for (pid,) in cursor.fetchall()}


@pytest.mark.postgres
@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="LISTEN is PostgreSQL's; on SQLite the hub reads the feed every 0.25 s",
)
def test_each_web_process_holds_one_listen_session_whatever_pages_are_open(
    asgi_server, make_vm, make_user, grant
):
    before = _listening_sessions()  # this test process's own, if an earlier test waited
    server = asgi_server(workers=2)
    vm = make_vm()
    tokens, cookies = _crowd(make_user, grant, vm, users=4)
    since = events.latest_token()
    pages = Pages(
        server.url,
        [Page("poll", tokens[n % 4], since) for n in range(20)]
        + [Page("sse", cookies[n % 4], since) for n in range(20)],
    )
    pages.start()
    event = _vm_event(vm, "to every page")
    _wait_for_all(pages, event)
    for n in range(10):  # answered at once, and with a wait of 0: no waiting reader
        requests.get(
            f"{server.url}/api/events/",
            params={"since": since},
            headers={"Authorization": f"Token {tokens[n % 4]}"},
            timeout=30,
        )

    listeners = _listening_sessions() - before
    pages.stop()

    assert len(listeners) == 2


def _resume_scenario(server, vm, tokens, cookies, interrupt, quiet_s: float = 0):
    """Pages of both kinds open, events before, during (after ``quiet_s``) and after
    ``interrupt(server)``; the pages, the events and when the interruption began."""
    since = events.latest_token()
    pages = Pages(
        server.url,
        [Page("poll", tokens[n % len(tokens)], since) for n in range(30)]
        + [Page("sse", cookies[n % len(cookies)], since) for n in range(30)],
        poll_timeout=30,
    )
    pages.start()
    sent = [_vm_event(vm, "before")]
    _wait_for_all(pages, sent[0])
    began = time.monotonic()
    thread = threading.Thread(target=interrupt, args=(server,))
    thread.start()
    time.sleep(quiet_s)
    while thread.is_alive():
        sent.append(_vm_event(vm, f"during {len(sent)}"))
        time.sleep(0.3)
    thread.join()
    sent.append(_vm_event(vm, "after"))
    _wait_for_all(pages, sent[-1], timeout=30)
    pages.stop()
    return pages, sent, began


def test_pages_of_a_reloaded_web_tier_reconnect_at_once_and_miss_no_event(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(workers=2, CORRAL_EVENT_STREAM_SECONDS=60)
    vm = make_vm()
    tokens, cookies = _crowd(make_user, grant, vm, users=6)

    def reload(server) -> None:
        server.reload()
        time.sleep(6)

    pages, sent, began = _resume_scenario(server, vm, tokens, cookies, reload, quiet_s=3)

    for page in pages.pages:
        assert [pk for pk in page.received if pk in {e.pk for e in sent}] == [e.pk for e in sent]
        assert page.resyncs == 0
    # The old processes ended their pages at once (not when the graceful timeout cut them, nor
    # after the 30 s poll or the 60 s stream), with no event in the first 3 s to answer them;
    # streams ended cleanly (a poll sent again on its closing connection is sent once more).
    ended = [min(t for t in page.ended_at if t > began) - began for page in pages.pages]
    assert max(ended) < 2.5, ended
    assert [page.failures for page in pages.pages if page.kind == "sse"] == [0] * 30


def test_pages_of_a_restarted_web_tier_resume_and_get_what_happened_while_it_was_down(
    asgi_server, make_vm, make_user, grant
):
    server = asgi_server(workers=1)
    vm = make_vm()
    tokens, cookies = _crowd(make_user, grant, vm, users=6)

    pages, sent, _ = _resume_scenario(server, vm, tokens, cookies, lambda s: s.restart())

    for page in pages.pages:
        assert [pk for pk in page.received if pk in {e.pk for e in sent}] == [e.pk for e in sent]
        assert page.resyncs == 0
    assert any(page.failures for page in pages.pages)  # the server was down a while
