"""A websocket client of the serial terminal's relay, as a browser's xterm.js is one."""

from __future__ import annotations

import asyncio

import aiohttp

REPLY_S = 45  # from a line typed to its output back (TCG, on a machine running two suites)


def ws_url(web, url: str) -> str:
    """The ticket's websocket URL (named for the test client's host) on the running server."""
    return url.replace("ws://testserver", web.url.replace("http://", "ws://"), 1)


async def run(
    url: str, origin: str, typed: list[str | bytes], until: bytes, *, first: bytes = b""
) -> bytes | None:
    """Open the websocket, read until ``first`` shows (the shell's prompt, say: the terminal
    is live), type each of ``typed`` (bytes as binary frames, str as text frames) and read
    until ``until`` shows; what came back, or None when refused."""
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=2 * REPLY_S + 15)
    ) as session:
        try:
            socket = await session.ws_connect(url, headers={"Origin": origin})
        except aiohttp.WSServerHandshakeError:
            return None
        async with socket:
            seen = await _read_until(socket, first, b"", "the terminal's first lines")
            for line in typed:
                if isinstance(line, bytes):
                    await socket.send_bytes(line)
                else:
                    await socket.send_str(line)
            return await _read_until(socket, until, seen, f"the answer to {typed!r}")


async def _read_until(socket, wanted: bytes, seen: bytes, what: str) -> bytes:
    """What the socket sent (after ``seen``) until ``wanted`` shows or it stops sending
    binary frames; a timeout says what it waited for and what came."""
    try:
        async with asyncio.timeout(REPLY_S):
            while wanted not in seen:
                message = await socket.receive()
                if message.type != aiohttp.WSMsgType.BINARY:
                    break
                seen += message.data
    except TimeoutError:
        raise AssertionError(
            f"{wanted!r} not in {what} within {REPLY_S} s; came: {seen[-600:]!r}"
        ) from None
    return seen
