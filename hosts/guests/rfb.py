"""The two RFB (VNC) handshakes the console relay makes (RFC 6143, section 7.1-7.2).

Towards the guest's screen the relay is the client: it authenticates with the password it
has just set on the guest (``authenticate``, VNC authentication, security type 2). Towards
the browser it is the server and offers no security of its own ("None", type 1): the browser
already proved who it is with its one-time ticket, and never sees the password
(``BrowserHandshake``). After both, the rest of the stream (ClientInit, ServerInit and every
message after them) is the same on both sides and is relayed byte for byte.
"""

from __future__ import annotations

import asyncio
import struct

from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

VERSION_3_8 = b"RFB 003.008\n"
VERSION_LENGTH = len(VERSION_3_8)
SECURITY_NONE = 1
SECURITY_VNC = 2
CHALLENGE_LENGTH = 16
OK = 0
# Versions the browser side understands (3.889 is Apple's, read as 3.8 by the spec's advice).
BROWSER_VERSIONS = {b"RFB 003.003\n": 3, b"RFB 003.007\n": 7, b"RFB 003.008\n": 8}
MAX_REASON = 4096


class HandshakeFailed(Exception):
    """The screen refused the relay, or spoke something that is not RFB 3.3-3.8."""


def vnc_response(challenge: bytes, password: str) -> bytes:
    """VNC authentication's answer: ``challenge`` DES-encrypted under the password (at most 8
    bytes, zero-padded), each key byte's bits in reverse order."""
    key = password.encode("latin-1", "replace")[:8].ljust(8, b"\0")
    key = bytes(int(f"{byte:08b}"[::-1], 2) for byte in key)
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


async def _reason(reader: asyncio.StreamReader) -> str:
    (length,) = struct.unpack("!I", await reader.readexactly(4))
    return (await reader.readexactly(min(length, MAX_REASON))).decode("utf-8", "replace")


async def authenticate(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, password: str
) -> None:
    """Make the client side of the handshake with the guest's screen, as RFB 3.8, using VNC
    authentication with ``password`` (or none, for a screen that asks for none). Returns
    when the screen accepted; ``HandshakeFailed`` (saying why) when it did not."""
    try:
        version = await reader.readexactly(VERSION_LENGTH)
        if not version.startswith(b"RFB 003."):
            raise HandshakeFailed(f"not an RFB server (it said {version[:12]!r})")
        writer.write(VERSION_3_8)
        (count,) = await reader.readexactly(1)
        if count == 0:
            raise HandshakeFailed(f"the screen refused the connection: {await _reason(reader)}")
        offered = set(await reader.readexactly(count))
        if SECURITY_VNC in offered:
            writer.write(bytes([SECURITY_VNC]))
            challenge = await reader.readexactly(CHALLENGE_LENGTH)
            writer.write(vnc_response(challenge, password))
        elif SECURITY_NONE in offered:
            writer.write(bytes([SECURITY_NONE]))
        else:
            raise HandshakeFailed(f"the screen offers no security type the relay speaks: {offered}")
        await writer.drain()
        (result,) = struct.unpack("!I", await reader.readexactly(4))
        if result != OK:
            raise HandshakeFailed(f"the screen refused the password: {await _reason(reader)}")
    except asyncio.IncompleteReadError as exc:
        raise HandshakeFailed("the screen closed the connection during the handshake") from exc


class BrowserHandshake:
    """The server side of the handshake with the browser, fed the bytes it sends.

    ``greeting()`` is sent first; each ``feed(data)`` returns the bytes to answer. Once
    ``done``, ``rest`` holds what the browser sent after the handshake (its ClientInit, for
    the guest's screen). ``HandshakeFailed`` when the browser does not speak RFB 3.3-3.8 or
    asks for a security type that was not offered.
    """

    def __init__(self) -> None:
        self.buffer = b""
        self.minor: int | None = None
        self.done = False
        self.rest = b""

    @staticmethod
    def greeting() -> bytes:
        return VERSION_3_8

    def feed(self, data: bytes) -> bytes:
        self.buffer += data
        if self.minor is None:
            if len(self.buffer) < VERSION_LENGTH:
                return b""
            version, self.buffer = self.buffer[:VERSION_LENGTH], self.buffer[VERSION_LENGTH:]
            self.minor = BROWSER_VERSIONS.get(version, 8 if version == b"RFB 003.889\n" else None)
            if self.minor is None:
                raise HandshakeFailed(f"the browser does not speak RFB 3.3-3.8: {version!r}")
            if self.minor == 3:  # 3.3: the server names the one type; no reply follows
                return self._finish(struct.pack("!I", SECURITY_NONE))
            return bytes([1, SECURITY_NONE]) + self.feed(b"")
        if not self.buffer:
            return b""
        chosen, self.buffer = self.buffer[0], self.buffer[1:]
        if chosen != SECURITY_NONE:
            raise HandshakeFailed(f"the browser chose security type {chosen}, not offered")
        # 3.8 confirms "None" with a SecurityResult; 3.7 does not.
        return self._finish(struct.pack("!I", OK) if self.minor == 8 else b"")

    def _finish(self, answer: bytes) -> bytes:
        self.done = True
        self.rest, self.buffer = self.buffer, b""
        return answer
