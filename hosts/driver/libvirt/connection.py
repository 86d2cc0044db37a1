"""libvirt connections: one per URI and process, kept alive, reopened after a failure.

libvirt's default event loop runs on a daemon thread in every process that uses the driver;
it carries keepalive probes (so a dead host is noticed) and lifecycle events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from typing import TypeVar

import libvirt

from hosts.driver.base import (
    DomainNotFound,
    DriverError,
    GuestAgentUnavailable,
    HostUnreachable,
    NotSupported,
    check_uri,
    claimed,
    connection_uri,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")

KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3

# Errors that mean "the host (or the way to it) is gone", not "the request was wrong".
UNREACHABLE_CODES = {
    libvirt.VIR_ERR_SYSTEM_ERROR,
    libvirt.VIR_ERR_RPC,
    libvirt.VIR_ERR_NO_CONNECT,
    libvirt.VIR_ERR_AUTH_FAILED,
    libvirt.VIR_ERR_OPERATION_TIMEOUT,
    libvirt.VIR_ERR_INVALID_CONN,
}


_lock = threading.Lock()
_connections: dict[str, libvirt.virConnect] = {}
_owner_pid: int | None = None
_event_loop_pid: int | None = None


def _quiet_errors(_ctx, _err) -> None:
    """libvirt prints every error to stderr by default; Corral raises them instead."""


libvirt.registerErrorHandler(_quiet_errors, None)


def ensure_event_loop() -> None:
    """Run libvirt's default event loop on a daemon thread in this process (once per process)."""
    global _event_loop_pid
    pid = os.getpid()
    if _event_loop_pid == pid:
        return
    with _lock:
        if _event_loop_pid == pid:
            return
        if _event_loop_pid is None:
            libvirt.virEventRegisterDefaultImpl()
        thread = threading.Thread(target=_run_event_loop, name="libvirt-events", daemon=True)
        thread.start()
        _event_loop_pid = pid


def _run_event_loop() -> None:
    while True:
        try:
            libvirt.virEventRunDefaultImpl()
        except Exception:  # the loop must outlive any one failing callback
            logger.exception("libvirt event loop iteration failed")


def _forget_after_fork() -> None:
    """A forked child must not share its parent's sockets: start with no connections."""
    global _owner_pid
    pid = os.getpid()
    if _owner_pid != pid:
        _connections.clear()
        _owner_pid = pid


def connection(uri: str) -> libvirt.virConnect:
    """An open, live connection to ``uri`` (reused; reopened if it died).

    A URI the allowlist refuses is never handed to libvirt, wherever it came from: a row
    written before the allowlist, or straight into the database, must not run its program.
    """
    check_uri(uri)
    if claimed(uri):
        raise _without_libvirt(uri)
    ensure_event_loop()
    with _lock:
        _forget_after_fork()
        conn = _connections.get(uri)
        if conn is not None:
            try:
                if conn.isAlive():
                    return conn
            except libvirt.libvirtError:
                pass
            _connections.pop(uri, None)
            _close_quietly(conn)
        try:
            conn = libvirt.open(connection_uri(uri))
        except libvirt.libvirtError as exc:
            raise _unreachable(uri, exc) from exc
        # Drivers without keepalive (the in-process test driver) need none.
        with contextlib.suppress(libvirt.libvirtError):
            conn.setKeepAlive(KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT)
        _connections[uri] = conn
        return conn


def open_dedicated(uri: str) -> libvirt.virConnect:
    """A new connection to ``uri`` of the caller's own (never shared nor cached), for a
    long-lived stream such as a serial terminal; the caller closes it. The same allowlist
    and backend checks as ``connection()``."""
    check_uri(uri)
    if claimed(uri):
        raise _without_libvirt(uri)
    ensure_event_loop()
    try:
        conn = libvirt.open(connection_uri(uri))
    except libvirt.libvirtError as exc:
        raise _unreachable(uri, exc) from exc
    with contextlib.suppress(libvirt.libvirtError):
        conn.setKeepAlive(KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT)
    return conn


def drop(uri: str) -> None:
    """Forget (and close) the cached connection to ``uri``."""
    with _lock:
        conn = _connections.pop(uri, None)
    if conn is not None:
        _close_quietly(conn)


def close_all() -> None:
    with _lock:
        conns = list(_connections.values())
        _connections.clear()
    for conn in conns:
        _close_quietly(conn)


def _close_quietly(conn: libvirt.virConnect) -> None:
    with contextlib.suppress(libvirt.libvirtError):
        conn.close()


def _text(exc: libvirt.libvirtError) -> str:
    return (exc.get_error_message() or str(exc)).strip()


def host_words(uri: str, exc: libvirt.libvirtError) -> str:
    """What the host said, for the admins (``DriverError.detail``): its URI and libvirt's own
    text, which names sockets, drivers and API calls the people using a VM need not read."""
    return f"{uri}: {_text(exc)}"


def _unreachable(uri: str, exc: libvirt.libvirtError) -> HostUnreachable:
    return HostUnreachable("The host does not answer.", uri=uri, detail=host_words(uri, exc))


def _without_libvirt(uri: str) -> NotSupported:
    return NotSupported(
        "The host is served without libvirt: it has no guest consoles or agents to reach.",
        uri=uri,
        detail=f"{uri} is served by another host driver than libvirt",
    )


def lookup_domain(conn: libvirt.virConnect, uuid: str) -> libvirt.virDomain | None:
    """The domain ``uuid`` on the host, or None when the host has no such domain."""
    try:
        return conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return None
        raise


# What a libvirt error means for the people using the VM, by its code (``translate``).
MEANINGS = {
    libvirt.VIR_ERR_NO_DOMAIN: "the host has no such VM",
    libvirt.VIR_ERR_NO_DOMAIN_SNAPSHOT: "the host has no such snapshot of the VM",
    libvirt.VIR_ERR_OPERATION_INVALID: "the VM is not in a state that allows it on its host",
    libvirt.VIR_ERR_NO_MEMORY: "the host is out of memory",
    libvirt.VIR_ERR_AGENT_UNRESPONSIVE: "the guest agent does not answer",
    libvirt.VIR_ERR_AGENT_UNSYNCED: "the guest agent does not answer",
    libvirt.VIR_ERR_OPERATION_TIMEOUT: "the host took too long",
}


def translate(uri: str, exc: libvirt.libvirtError, what: str) -> DriverError:
    """Turn a libvirt error into the DriverError a caller can act on: its message says what
    failed and what it means, in words (``what``: "start the VM"); libvirt's own text and the
    host's URI go in its ``detail``, for the admins."""
    code = exc.get_error_code()
    detail = host_words(uri, exc)
    if code in UNREACHABLE_CODES:
        drop(uri)
        return HostUnreachable(
            f"Lost the connection to the host while trying to {what}.", uri=uri, detail=detail
        )
    if code == libvirt.VIR_ERR_NO_SUPPORT:
        return NotSupported(f"The host cannot {what}.", uri=uri, detail=detail)
    kind = DriverError
    if code in (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_NO_DOMAIN_SNAPSHOT):
        kind = DomainNotFound
    elif code in (libvirt.VIR_ERR_AGENT_UNRESPONSIVE, libvirt.VIR_ERR_AGENT_UNSYNCED):
        kind = GuestAgentUnavailable
    meaning = MEANINGS.get(code, "the host refused it")
    return kind(f"Could not {what}: {meaning}.", uri=uri, detail=detail)


def call(uri: str, what: str, fn: Callable[[libvirt.virConnect], T], *, retry: bool = False) -> T:
    """Run ``fn(connection)`` and translate libvirt errors.

    With ``retry`` (safe for reads only), a connection that turns out dead is reopened and
    ``fn`` tried once more before the host is declared unreachable.
    """
    attempts = 2 if retry else 1
    for attempt in range(attempts):
        conn = connection(uri)
        try:
            return fn(conn)
        except libvirt.libvirtError as exc:
            error = translate(uri, exc, what)
            if isinstance(error, HostUnreachable) and attempt + 1 < attempts:
                continue
            raise error from exc
    raise AssertionError("unreachable")
