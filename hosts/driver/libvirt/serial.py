"""A guest's serial console as a byte stream (``virDomainOpenConsole``), on a libvirt
connection of its own, so that it works for a remote host as for a local one.

``recv`` blocks (run it on a thread); ``send`` may be called from another thread meanwhile.
``close`` ends the stream (a blocked ``recv`` returns) and the connection.
"""

from __future__ import annotations

import contextlib
import threading

import libvirt

from hosts.driver.base import DriverError
from hosts.driver.libvirt.connection import _close_quietly, host_words, open_dedicated, translate

CHUNK = 64 * 1024


class SerialConsole:
    """One open serial terminal of one guest."""

    def __init__(self, uri: str, uuid: str) -> None:
        self.uri = uri
        self._closed = threading.Event()
        self._conn = open_dedicated(uri)
        try:
            domain = self._conn.lookupByUUIDString(uuid)
            self._stream = self._conn.newStream(0)
            # FORCE: a terminal left open elsewhere (another tab, virsh console) gives way.
            domain.openConsole(None, self._stream, libvirt.VIR_DOMAIN_CONSOLE_FORCE)
        except libvirt.libvirtError as exc:
            _close_quietly(self._conn)
            raise translate(uri, exc, "open the guest's serial console") from exc

    def recv(self) -> bytes:
        """The next bytes the guest wrote (blocking); b"" once the console has ended."""
        if self._closed.is_set():
            return b""
        try:
            data = self._stream.recv(CHUNK)
        except libvirt.libvirtError as exc:
            if self._closed.is_set():
                return b""
            raise self._broke(exc) from exc
        if isinstance(data, int):  # -2: "try again", only on non-blocking streams
            return b""
        return data

    def send(self, data: bytes) -> None:
        """Type ``data`` into the guest's console."""
        view = memoryview(data)
        while view and not self._closed.is_set():
            try:
                sent = self._stream.send(bytes(view))
            except libvirt.libvirtError as exc:
                raise self._broke(exc) from exc
            if sent < 0:  # -2: would block; a blocking stream does not answer that
                continue
            view = view[sent:]

    def _broke(self, exc: libvirt.libvirtError) -> DriverError:
        return DriverError(
            "The serial console broke off.", uri=self.uri, detail=host_words(self.uri, exc)
        )

    def close(self) -> None:
        """End the stream and the connection (once; safe from any thread)."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(libvirt.libvirtError):
            self._stream.abort()
        _close_quietly(self._conn)


def has_serial_consoles(uri: str) -> bool:
    """Every guest Corral defines on a libvirt host has a serial console (``guests``)."""
    return True


def open_serial_console(uri: str, uuid: str) -> SerialConsole:
    """The serial console of the guest ``uuid`` on the host at ``uri``, opened now (taking it
    over from any other client). Raises ``DriverError`` (``HostUnreachable``,
    ``DomainNotFound``…) when it cannot."""
    return SerialConsole(uri, uuid)
