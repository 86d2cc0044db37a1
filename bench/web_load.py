"""Clients of the web tier as its users run them, for the web benchmarks and the live tests:
browser pages following the event stream, scripts long-polling the event feed, and a prober
asking GET /api/me/ at a fixed rate.

Each kind runs on an asyncio loop of its own (aiohttp: one loop holds thousands of open pages);
run them in separate processes (``python -m bench.web_load SPEC OUT``) so that one's work never
delays another's clock. Times are ``time.monotonic()``, which every process on the machine
shares, so a marker's emission in one process and its arrival in another compare directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field

import aiohttp

# A client's back-off after a refusal or a lost connection: from MIN, doubling to MAX, each
# delay drawn between half and all of it (jitter, so that refused clients do not return at once).
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 8.0


def backoff(attempt: int, retry_after: float | None = None) -> float:
    ceiling = min(BACKOFF_MAX_S, BACKOFF_MIN_S * 2**attempt)
    if retry_after is not None:
        ceiling = max(ceiling, retry_after)
    return random.uniform(ceiling / 2, ceiling)


def live_js_delay(attempt: int) -> float:
    """The portal's script's delay before a new stream after a refused one: 1 s doubling to
    30 s, each drawn between half and all of it (project/static/corral/live.js)."""
    ceiling = min(30.0, 1.0 * 2**attempt)
    return random.uniform(ceiling / 2, ceiling)


def _retry_after(response: aiohttp.ClientResponse) -> float | None:
    with contextlib.suppress(TypeError, ValueError):
        return float(response.headers.get("Retry-After"))
    return None


@dataclass
class Page:
    """One open page: a browser's event stream (``kind`` "sse", a session cookie) or a script's
    long poll (``kind`` "poll", an API token). It records every event id it received and when
    each marker message arrived."""

    kind: str
    credential: str
    position: int | None = None  # the last event id or token: where a reconnection resumes
    received: list[int] = field(default_factory=list)
    markers: dict[str, float] = field(default_factory=dict)
    answers: int = 0  # long polls answered, stream responses opened
    refusals: dict[int, int] = field(default_factory=dict)  # status -> how many
    failures: int = 0  # connections lost or refused before an answer
    resyncs: int = 0
    opened_at: float | None = None  # the first successful answer or open
    last_ok_at: float | None = None
    ended_at: list[float] = field(default_factory=list)  # each response's end, or loss

    def note_answer(self) -> None:
        now = time.monotonic()
        self.answers += 1
        self.opened_at = self.opened_at or now
        self.last_ok_at = now

    def note_refusal(self, status: int) -> None:
        self.refusals[status] = self.refusals.get(status, 0) + 1

    def summary(self) -> dict:
        return {
            "kind": self.kind,
            "position": self.position,
            "received": self.received,
            "markers": self.markers,
            "answers": self.answers,
            "refusals": self.refusals,
            "failures": self.failures,
            "resyncs": self.resyncs,
            "opened_at": self.opened_at,
            "last_ok_at": self.last_ok_at,
        }


def _note_events(page: Page, events: list[dict], marker_prefix: str) -> None:
    now = time.monotonic()
    for event in events:
        page.received.append(event["id"])
        message = event.get("message", "")
        if message.startswith(marker_prefix) and message not in page.markers:
            page.markers[message] = now


async def _follow_stream(
    session, url: str, cookie_name: str, page: Page, marker_prefix: str, stop: asyncio.Event
):
    """As a portal page follows the stream: the browser's EventSource reconnects after the
    stream's ``retry`` delay when a response ends or the connection is lost, resuming with
    Last-Event-ID; refused with an error status, it gives up and the page's script
    (project/static/corral/live.js) opens a new one after a growing delay with jitter."""
    attempt = 0
    retry_s = 1.0  # until the stream says otherwise
    while not stop.is_set():
        headers = {"Cookie": f"{cookie_name}={page.credential}", "Accept": "text/event-stream"}
        if page.position is not None:
            headers["Last-Event-ID"] = str(page.position)
        try:
            async with session.get(f"{url}/events/stream/", headers=headers) as response:
                if response.status != 200:
                    page.note_refusal(response.status)
                    await response.read()
                    await asyncio.sleep(live_js_delay(attempt))
                    attempt += 1
                    continue
                page.note_answer()
                attempt = 0
                block: dict[str, str] = {}
                async for raw in response.content:
                    line = raw.decode().rstrip("\r\n")
                    if line:
                        name, _, value = line.partition(":")
                        block[name] = value.removeprefix(" ")
                        continue
                    if "id" in block:
                        page.position = int(block["id"])
                    if "retry" in block:
                        retry_s = int(block["retry"]) / 1000
                    if block.get("event") == "resync":
                        page.resyncs += 1
                    elif block.get("event") == "change":
                        _note_events(page, [json.loads(block["data"])], marker_prefix)
                    page.last_ok_at = time.monotonic()
                    block = {}
            page.ended_at.append(time.monotonic())
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            page.failures += 1
            page.ended_at.append(time.monotonic())
        await asyncio.sleep(retry_s)


async def _long_poll(
    session, url: str, page: Page, timeout: float, marker_prefix: str, stop: asyncio.Event
):
    attempt = 0
    headers = {"Authorization": f"Token {page.credential}"}
    while not stop.is_set():
        params = {"since": page.position or 0, "timeout": timeout}
        try:
            async with session.get(f"{url}/api/events/", params=params, headers=headers) as answer:
                if answer.status != 200:
                    page.note_refusal(answer.status)
                    await answer.read()
                    await asyncio.sleep(backoff(attempt, _retry_after(answer)))
                    attempt += 1
                    continue
                body = await answer.json()
        except (TimeoutError, aiohttp.ClientError, ConnectionError, ValueError):
            page.failures += 1
            page.ended_at.append(time.monotonic())
            await asyncio.sleep(backoff(attempt))
            attempt += 1
            continue
        attempt = 0
        page.note_answer()
        page.ended_at.append(page.last_ok_at)
        if body.get("resync"):
            page.resyncs += 1
        _note_events(page, body["events"], marker_prefix)
        page.position = body["token"]


async def run_pages(
    spec: dict, pages: list[Page] | None = None, stopped: threading.Event | None = None
) -> dict:
    """Open ``spec["pages"]`` (each {"kind", "credential", "position"}; or ``pages``) against
    ``spec["url"]``, ``spec["open_over_s"]`` seconds apart in all, and keep them open until
    ``spec["until"]`` (a monotonic time), until ``stopped`` is set or the file
    ``spec["stop_file"]`` exists."""
    if pages is None:
        pages = [Page(p["kind"], p["credential"], p.get("position")) for p in spec["pages"]]
    stop = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=90)
    prefix = spec.get("marker_prefix", "marker ")
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = []
        gap = spec.get("open_over_s", 0) / max(1, len(pages))
        for page in pages:
            if page.kind == "sse":
                work = _follow_stream(session, spec["url"], spec["cookie_name"], page, prefix, stop)
            else:
                work = _long_poll(session, spec["url"], page, spec["poll_timeout"], prefix, stop)
            tasks.append(asyncio.create_task(work))
            if gap:
                await asyncio.sleep(gap)
        stop_file = spec.get("stop_file")
        while time.monotonic() < spec["until"] and not (stopped and stopped.is_set()):
            if stop_file and os.path.exists(stop_file):
                break
            await asyncio.sleep(0.05)
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"pages": [page.summary() for page in pages]}


async def run_prober(spec: dict) -> dict:
    """GET ``spec["url"]``/api/me/ ``spec["rate"]`` times a second (open loop: each request
    leaves at its time whether or not the last one was answered) from ``spec["start"]`` until
    ``spec["until"]`` or until the file ``spec["stop_file"]`` exists; a request not answered
    within ``spec["request_timeout"]`` seconds counts as timed out."""
    samples: list[tuple[float, float, int]] = []  # (sent at, milliseconds, status; 0: timed out)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=spec.get("request_timeout", 10))
    tokens = spec["tokens"]

    async def one(n: int, sent_at: float) -> None:
        headers = {"Authorization": f"Token {tokens[n % len(tokens)]}"}
        try:
            async with session.get(f"{spec['url']}/api/me/", headers=headers) as response:
                await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            status = 0
        samples.append((sent_at, (time.monotonic() - sent_at) * 1000, status))

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        interval = 1 / spec["rate"]
        start = spec.get("start") or time.monotonic()
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        tasks = []
        n = 0
        stop_file = spec.get("stop_file")
        while (due := start + n * interval) < spec["until"]:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if stop_file and n % 10 == 0 and os.path.exists(stop_file):
                break
            tasks.append(asyncio.create_task(one(n, time.monotonic())))
            n += 1
        await asyncio.gather(*tasks)
    return {"samples": samples}


RUNNERS = {"pages": run_pages, "prober": run_prober}


def main() -> None:
    """``python -m bench.web_load SPEC OUT``: run the JSON spec in file SPEC, write the result
    as JSON to file OUT (not to standard output, which the event loop may leave non-blocking)."""
    spec_path, out_path = sys.argv[1:3]
    with open(spec_path) as spec_file:
        spec = json.load(spec_file)
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    result = asyncio.run(RUNNERS[spec["run"]](spec))
    with open(out_path, "w") as out:
        json.dump(result, out)


if __name__ == "__main__":
    main()
