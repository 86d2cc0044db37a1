"""What noVNC does on the console websocket, over whichever websocket client a test holds (the
test's own ASGI application, or a running web server): the RFB 3.8 handshake the relay offers
(security "None"), the screen's ServerInit, and the first picture of it the guest sends."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hosts.guests import rfb

SET_ENCODINGS, FRAMEBUFFER_UPDATE_REQUEST = 2, 3
FRAMEBUFFER_UPDATE = 0
RAW = 0


@dataclass(frozen=True)
class Screen:
    """The screen as its ServerInit describes it: its size and the name QEMU gives it."""

    width: int
    height: int
    name: bytes


@dataclass(frozen=True)
class Rectangle:
    x: int
    y: int
    width: int
    height: int
    encoding: int


class Viewer:
    """The browser's side of the relayed RFB stream. ``receive()`` gives the next bytes the
    websocket brought, ``send(data)`` sends bytes."""

    def __init__(
        self, receive: Callable[[], Awaitable[bytes]], send: Callable[[bytes], Awaitable[None]]
    ) -> None:
        self.receive, self.send = receive, send
        self.received = b""

    async def take(self, size: int) -> bytes:
        while len(self.received) < size:
            self.received += await self.receive()
        data, self.received = self.received[:size], self.received[size:]
        return data

    async def open(self) -> Screen:
        """Handshake as noVNC does (RFB 3.8, security "None", a shared ClientInit); the
        screen's ServerInit."""
        assert await self.take(12) == rfb.VERSION_3_8
        await self.send(rfb.VERSION_3_8)
        assert await self.take(2) == bytes([1, rfb.SECURITY_NONE])  # the relay asks no password
        await self.send(bytes([rfb.SECURITY_NONE]))
        assert await self.take(4) == b"\0\0\0\0"
        await self.send(b"\x01")  # ClientInit: share the screen
        width, height = struct.unpack("!HH", await self.take(4))
        await self.take(16)  # the pixel format
        (length,) = struct.unpack("!I", await self.take(4))
        return Screen(width, height, await self.take(length))

    async def first_picture(self, screen: Screen) -> Rectangle:
        """Ask for the whole screen in raw pixels; the first rectangle of the update the
        screen sends (its pixels are not read)."""
        await self.send(struct.pack("!BxHi", SET_ENCODINGS, 1, RAW))
        await self.send(
            struct.pack("!BBHHHH", FRAMEBUFFER_UPDATE_REQUEST, 0, 0, 0, screen.width, screen.height)
        )
        kind, count = struct.unpack("!BxH", await self.take(4))
        assert kind == FRAMEBUFFER_UPDATE and count >= 1
        return Rectangle(*struct.unpack("!HHHHi", await self.take(12)))
