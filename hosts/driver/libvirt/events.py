"""libvirt lifecycle events: a listener per process that tells Corral a domain changed."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable

import libvirt

from hosts.driver.base import DriverError, claimed
from hosts.driver.libvirt.connection import connection

logger = logging.getLogger(__name__)

LIFECYCLE_EVENTS = {
    libvirt.VIR_DOMAIN_EVENT_DEFINED: "defined",
    libvirt.VIR_DOMAIN_EVENT_UNDEFINED: "undefined",
    libvirt.VIR_DOMAIN_EVENT_STARTED: "started",
    libvirt.VIR_DOMAIN_EVENT_SUSPENDED: "suspended",
    libvirt.VIR_DOMAIN_EVENT_RESUMED: "resumed",
    libvirt.VIR_DOMAIN_EVENT_STOPPED: "stopped",
    libvirt.VIR_DOMAIN_EVENT_SHUTDOWN: "shutdown",
    libvirt.VIR_DOMAIN_EVENT_PMSUSPENDED: "pmsuspended",
    libvirt.VIR_DOMAIN_EVENT_CRASHED: "crashed",
}

# callback(uri, domain_uuid, event_name); called on libvirt's event thread: keep it short.
Callback = Callable[[str, str, str], None]


class LifecycleListener:
    """Registers for lifecycle events on a set of hosts and re-registers after reconnects."""

    def __init__(self, callback: Callback):
        self._callback = callback
        self._lock = threading.Lock()
        self._registered: dict[str, tuple[libvirt.virConnect, int]] = {}

    def watch(self, uris: Iterable[str]) -> dict[str, str]:
        """Make sure every URI is watched (and no other); returns {uri: error} for failures."""
        # Hosts of other backends send no events: the sync's interval covers them.
        wanted = {uri for uri in uris if not claimed(uri)}
        errors = {}
        with self._lock:
            for uri in list(self._registered):
                if uri not in wanted:
                    self._unregister(uri)
            for uri in wanted:
                try:
                    conn = connection(uri)
                except DriverError as exc:
                    self._registered.pop(uri, None)
                    errors[uri] = exc.message
                    continue
                current = self._registered.get(uri)
                if current is not None and current[0] is conn:
                    continue
                try:
                    callback_id = conn.domainEventRegisterAny(
                        None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_event, uri
                    )
                except libvirt.libvirtError as exc:
                    errors[uri] = str(exc)
                    continue
                self._registered[uri] = (conn, callback_id)
        return errors

    def close(self) -> None:
        with self._lock:
            for uri in list(self._registered):
                self._unregister(uri)

    def _unregister(self, uri: str) -> None:
        conn, callback_id = self._registered.pop(uri)
        with contextlib.suppress(libvirt.libvirtError):
            conn.domainEventDeregisterAny(callback_id)

    def _on_event(self, _conn, dom, event: int, _detail: int, uri: str) -> None:
        try:
            self._callback(uri, dom.UUIDString(), LIFECYCLE_EVENTS.get(event, str(event)))
        except Exception:
            logger.exception("lifecycle event handler failed for %s", uri)
