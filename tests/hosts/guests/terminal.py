"""A websocket client of the serial terminal's relay, as a browser's xterm.js is one."""

from __future__ import annotations

import asyncio

import aiohttp

REPLY_S = 90  # from a line typed to its output back (TCG, on a machine running two suites: a
# guest just moved there answered nothing for 45 s once)


def ws_url(web, url: str) -> str:
    """The ticket's websocket URL (named for the test client's host) on the running server."""
    return url.replace("ws://testserver", web.url.replace("http://", "ws://"), 1)


async def run(
    url: str,
    origin: str,
    typed: list[str | bytes],
    until: bytes,
    *,
    first: bytes = b"",
    retype_every: float | None = None,
) -> bytes | None:
    """Open the websocket, read until ``first`` shows (the shell's prompt, say: the terminal
    is live), type each of ``typed`` (bytes as binary frames, str as text frames) and read
    until ``until`` shows; what came back, or None when refused. With ``retype_every``, type
    them again each time that many seconds pass without ``until`` (a guest still booting drops
    what was typed before its shell started: as a person would, type it again)."""
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=2 * REPLY_S + 15)
    ) as session:
        try:
            socket = await session.ws_connect(url, headers={"Origin": origin})
        except aiohttp.WSServerHandshakeError:
            return None
        async with socket:
            seen, _ = await _read_until(socket, first, b"", REPLY_S)
            if first not in seen:
                raise AssertionError(f"{first!r} not in the terminal's first lines: {seen!r}")
            deadline = asyncio.get_running_loop().time() + REPLY_S
            while True:
                for line in typed:
                    if isinstance(line, bytes):
                        await socket.send_bytes(line)
                    else:
                        await socket.send_str(line)
                left = deadline - asyncio.get_running_loop().time()
                seen, closed = await _read_until(
                    socket, until, seen, min(retype_every or left, left)
                )
                if until in seen or closed:
                    return seen
                if asyncio.get_running_loop().time() >= deadline:
                    raise AssertionError(
                        f"{until!r} not in the answer to {typed!r} within {REPLY_S} s; "
                        f"came: {seen[-600:]!r}"
                    )


async def _read_until(socket, wanted: bytes, seen: bytes, within: float) -> tuple[bytes, bool]:
    """``seen`` and what the socket sent after it, until ``wanted`` shows, ``within`` seconds
    pass or it stops sending binary frames (then: closed)."""
    try:
        async with asyncio.timeout(max(within, 0)):
            while wanted not in seen:
                message = await socket.receive()
                if message.type != aiohttp.WSMsgType.BINARY:
                    return seen, True
                seen += message.data
    except TimeoutError:
        pass
    return seen, False
