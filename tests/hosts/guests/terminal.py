"""A websocket client of the serial terminal's relay, as a browser's xterm.js is one."""

from __future__ import annotations

import asyncio

import aiohttp

REPLY_S = 20  # from a line typed to its output back (TCG, on a shared machine)


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
            seen = b""
            async with asyncio.timeout(REPLY_S):
                while first not in seen:
                    message = await socket.receive()
                    if message.type != aiohttp.WSMsgType.BINARY:
                        break
                    seen += message.data
            for line in typed:
                if isinstance(line, bytes):
                    await socket.send_bytes(line)
                else:
                    await socket.send_str(line)
            async with asyncio.timeout(REPLY_S):
                while until not in seen:
                    message = await socket.receive()
                    if message.type != aiohttp.WSMsgType.BINARY:
                        break
                    seen += message.data
            return seen
