"""libvirt connections: one per URI and process, kept alive, reopened after a failure; and
what a libvirt error means (``translate``, ``open_failure``): a host that is gone, one that
would not let Corral in (and why), or a host that answers and refused or failed the call.

libvirt's default event loop runs on a daemon thread in every process that uses the driver;
it carries keepalive probes (so a dead host is noticed) and lifecycle events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar
from urllib.parse import urlsplit

import libvirt

from hosts.driver.base import (
    DomainNotFound,
    DriverError,
    GuestAgentUnavailable,
    HostProblem,
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

# Errors that may mean "the host (or the way to it) is gone" — or not: libvirt reports with the
# same codes what fails on a host that answers well (a socket QEMU needs, a missing file, QEMU
# exiting as it starts: VIR_ERR_SYSTEM_ERROR; a hung QEMU: VIR_ERR_OPERATION_TIMEOUT). Whether
# the connection still answers tells them apart (``translate``).
LOST_OR_FAILED_CODES = {
    libvirt.VIR_ERR_SYSTEM_ERROR,
    libvirt.VIR_ERR_RPC,
    libvirt.VIR_ERR_NO_CONNECT,
    libvirt.VIR_ERR_AUTH_FAILED,
    libvirt.VIR_ERR_OPERATION_TIMEOUT,
    libvirt.VIR_ERR_INVALID_CONN,
}


_lock = threading.Lock()  # the cache; held for no libvirt call
_connections: dict[str, libvirt.virConnect] = {}
# One lock per URI, held while its connection is checked and opened: a host that is slow to
# open (an SSH login, one that times out) holds up the callers of that host only.
_opening: dict[str, threading.Lock] = {}
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
        _opening.clear()  # a lock held at the fork stays held in the child
        _owner_pid = pid


def _opening_lock(uri: str) -> threading.Lock:
    with _lock:
        _forget_after_fork()
        return _opening.setdefault(uri, threading.Lock())


def connection(uri: str) -> libvirt.virConnect:
    """An open, live connection to ``uri`` (reused; reopened if it died).

    A URI the allowlist refuses is never handed to libvirt, wherever it came from: a row
    written before the allowlist, or straight into the database, must not run its program.
    """
    check_uri(uri)
    if claimed(uri):
        raise _without_libvirt(uri)
    ensure_event_loop()
    with _opening_lock(uri):
        with _lock:
            conn = _connections.get(uri)
        if conn is not None:
            try:
                if conn.isAlive():
                    return conn
            except libvirt.libvirtError:
                pass
            with _lock:
                if _connections.get(uri) is conn:
                    del _connections[uri]
            _close_quietly(conn)
        try:
            conn = libvirt.open(connection_uri(uri))
        except libvirt.libvirtError as exc:
            raise open_failure(uri, exc) from exc
        # Drivers without keepalive (the in-process test driver) need none.
        with contextlib.suppress(libvirt.libvirtError):
            conn.setKeepAlive(KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT)
        with _lock:
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
        raise open_failure(uri, exc) from exc
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


# The frame of ``@`` around ssh's warnings.
_FRAME = re.compile(r"(?m)@{2,}|^\s*@|@\s*$")


def _text(exc: libvirt.libvirtError) -> str:
    """libvirt's message on one line: what ssh printed in it (lines ending in CR LF, a warning
    framed in ``@``) joined by single spaces, without the frame."""
    text = _FRAME.sub(" ", exc.get_error_message() or str(exc))
    return " ".join(text.split())


def host_words(uri: str, exc: libvirt.libvirtError) -> str:
    """What the host said, for the admins (``DriverError.detail``): its URI and libvirt's own
    text, which names sockets, drivers and API calls the people using a VM need not read."""
    return f"{uri}: {_text(exc)}"


# Transports that log in to the host with SSH: their errors carry what ssh, or the command it
# ran on the host (``virt-ssh-helper``, ``nc``), printed.
SSH_TRANSPORTS = {"ssh", "libssh", "libssh2"}
# What ssh (OpenSSH, libssh) prints when the host's key is not the one it knows for it, and
# when the host's key is not known at all (with no terminal to ask on).
HOST_KEY_CHANGED_WORDS = ("remote host identification has changed", "differs from stored identity")
HOST_KEY_UNKNOWN_WORDS = ("host key verification failed", "host key is unknown")
# What an SSH server prints when it refuses the login.
LOGIN_REFUSED_WORDS = ("permission denied (", "too many authentication failures")
# What the command ssh runs on the host prints when the host's libvirt daemon is not there:
# the host let Corral in, its libvirt did not answer.
NO_DAEMON_WORDS = ("virt-ssh-helper", "failed to connect socket", "nc: ")
# libvirt refusing the connection itself (its access control, a driver it lacks).
LIBVIRT_REFUSALS = {
    libvirt.VIR_ERR_ACCESS_DENIED,
    libvirt.VIR_ERR_AUTH_UNAVAILABLE,
    libvirt.VIR_ERR_OPERATION_DENIED,
    libvirt.VIR_ERR_NO_CONNECT,
}
OPEN_FAILURES = {
    HostProblem.UNREACHABLE: "The host does not answer.",
    HostProblem.AUTH_REFUSED: "The host refused Corral's login (authentication failed).",
    HostProblem.HOST_KEY_CHANGED: (
        "The host's SSH key has changed since it was trusted: Corral does not connect until "
        "an admin checks the host and updates its known key."
    ),
    HostProblem.HOST_KEY_UNKNOWN: (
        "The host's SSH key is not among the keys Corral knows: Corral does not connect until "
        "an admin adds it."
    ),
    HostProblem.LIBVIRT_REFUSED: "The host answered, but its libvirt refused the connection.",
}


def open_failure(uri: str, exc: libvirt.libvirtError) -> HostUnreachable:
    """Why ``libvirt.open(uri)`` failed, as the ``HostUnreachable`` whose ``reason`` the host's
    status shows: nothing answered, the login was refused, the host's SSH key changed or is
    unknown, or the host let Corral in and its libvirt refused the connection."""
    reason = _open_reason(uri, exc)
    return HostUnreachable(
        OPEN_FAILURES[reason], uri=uri, detail=host_words(uri, exc), reason=reason
    )


def _open_reason(uri: str, exc: libvirt.libvirtError) -> str:
    code, text = exc.get_error_code(), _text(exc).lower()
    if any(words in text for words in HOST_KEY_CHANGED_WORDS):
        return HostProblem.HOST_KEY_CHANGED
    if any(words in text for words in HOST_KEY_UNKNOWN_WORDS):
        return HostProblem.HOST_KEY_UNKNOWN
    if code == libvirt.VIR_ERR_AUTH_FAILED or any(words in text for words in LOGIN_REFUSED_WORDS):
        return HostProblem.AUTH_REFUSED
    if code in LIBVIRT_REFUSALS:
        return HostProblem.LIBVIRT_REFUSED
    transport = urlsplit(uri).scheme.partition("+")[2]
    if transport in SSH_TRANSPORTS and any(words in text for words in NO_DAEMON_WORDS):
        return HostProblem.LIBVIRT_REFUSED
    return HostProblem.UNREACHABLE


def answers(conn: libvirt.virConnect, *, ask: bool = True) -> bool:
    """Whether the host behind ``conn`` answers now: the connection is alive (its keepalive
    has not given up on it) and, with ``ask``, a call that costs the host nothing comes back
    (a cut connection fails it, at the latest once the keepalive gives up)."""
    try:
        return bool(conn.isAlive()) and (not ask or conn.getLibVersion() > 0)
    except libvirt.libvirtError:
        return False


def _lost(
    uri: str,
    exc: libvirt.libvirtError,
    conn: libvirt.virConnect | None,
    others: Iterable[tuple[str, libvirt.virConnect]],
) -> str | None:
    """The URI of the call's host that no longer answers (None: they all do)."""
    maybe_lost = exc.get_error_code() in LOST_OR_FAILED_CODES
    if conn is None:  # no connection to ask: the code decides
        return uri if maybe_lost else None
    for host_uri, host_conn in ((uri, conn), *others):
        if not answers(host_conn, ask=maybe_lost):
            return host_uri
    return None


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
    libvirt.VIR_ERR_SYSTEM_ERROR: "it failed on the host",
    libvirt.VIR_ERR_INTERNAL_ERROR: "it failed on the host",
}


def translate(
    uri: str,
    exc: libvirt.libvirtError,
    what: str,
    conn: libvirt.virConnect | None = None,
    *,
    others: Iterable[tuple[str, libvirt.virConnect]] = (),
) -> DriverError:
    """Turn a libvirt error into the DriverError a caller can act on: its message says what
    failed and what it means, in words (``what``: "start the VM"); libvirt's own text and the
    host's URI go in its ``detail``, for the admins.

    It is ``HostUnreachable`` when the host no longer answers on ``conn`` (the connection the
    call was made on), or one of ``others`` (the call's other hosts, ``(uri, connection)``: a
    migration's destination) no longer does on its own, whatever the error's code; a host
    that answers failed or refused the call itself, and says why in libvirt's words. Without
    ``conn`` the code alone decides (``LOST_OR_FAILED_CODES`` are taken for a lost host)."""
    code = exc.get_error_code()
    others = list(others)
    # A call between hosts is made on the first; what it says may come from any of them.
    detail = host_words(" -> ".join([uri, *(other for other, _ in others)]), exc)
    lost = _lost(uri, exc, conn, others)
    if lost is not None:
        drop(lost)
        host = "the host" if lost == uri else "the other host"
        return HostUnreachable(
            f"Lost the connection to {host} while trying to {what}.",
            uri=lost,
            detail=host_words(lost, exc),
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
            error = translate(uri, exc, what, conn)
            if isinstance(error, HostUnreachable) and attempt + 1 < attempts:
                continue
            raise error from exc
    raise AssertionError("unreachable")
