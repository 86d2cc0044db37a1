"""The serial terminal websocket: redeems a one-time ticket and relays the guest's serial
console between the browser (xterm.js) and the VM's host, byte for byte. A ticket refused
(unknown, used, expired) refuses the websocket; a console the host could not open closes it
(code 4502) with the reason in words, which the terminal page shows.

A terminal opens showing the console's last lines (its log's tail, read through libvirt), the
prompt the guest printed before anyone connected among them. Then each terminal opens a
libvirt connection of its own to the VM's host (the URI recorded for the host, checked by the
allowlist again) and the guest's console on it
(``hosts.driver.open_serial_console``): a thread of the terminal's own reads the console and hands
each chunk to the websocket as a binary frame, waiting until it is sent (a slow browser slows
the guest's output rather than filling memory); what the browser sends (binary frames, or
text frames taken as UTF-8) is typed into the console. Either side ending ends both, and the
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from hosts import driver
from hosts.driver import ConsoleStream, DriverError
from hosts.guests import consoles
from hosts.guests.console_relay import REFUSED, UNREACHABLE

logger = logging.getLogger(__name__)
OPEN_TIMEOUT_S = 10


# A websocket close frame's reason holds at most 123 bytes.
REASON_BYTES = 123


def why_not_opened(exc: Exception) -> str:
    """What the terminal page says when the guest's console could not be opened: in words (a
    driver error's message), never the host's internals, cut to fit a close frame."""
    if isinstance(exc, DriverError):
        why = exc.message
    else:
        why = f"The host did not open the guest's serial console within {OPEN_TIMEOUT_S} s."
    return why.encode()[:REASON_BYTES].decode(errors="ignore")


class SerialRelay(AsyncWebsocketConsumer):
    console: ConsoleStream | None = None
    reader: threading.Thread | None = None

    async def connect(self) -> None:
        token = self.scope["url_route"]["kwargs"].get("ticket", "")
        redeem = database_sync_to_async(consoles.redeem_serial_ticket)
        target = await redeem(token, self.scope.get("user"))
        if target is None:
            await self.close(code=REFUSED)
            return
        # What the console shows now (its last lines, the prompt among them), read before the
        # console opens so that nothing shows twice: the guest's shell wrote its prompt before
        # anyone connected, and a terminal opens on it.
        try:
            shown = await asyncio.to_thread(
                driver.recent_output, target.uri, target.uuid, target.storage_pool
            )
        except DriverError as exc:
            logger.info("Serial terminal of VM %s: no recent output: %s", target.vm_id, exc)
            shown = b""
        offered = self.scope.get("subprotocols") or []
        try:
            self.console = await asyncio.wait_for(
                asyncio.to_thread(driver.open_serial_console, target.uri, target.uuid),
                OPEN_TIMEOUT_S,
            )
        except (DriverError, TimeoutError) as exc:
            detail = exc.for_admins if isinstance(exc, DriverError) else "timed out"
            logger.warning("Serial terminal of VM %s: cannot open it: %s", target.vm_id, detail)
            # Accepted, then closed with the reason in words: a refused handshake would tell
            # the page nothing, and its user would blame the ticket.
            await self.accept("binary" if "binary" in offered else None)
            await self.close(code=UNREACHABLE, reason=why_not_opened(exc))
            return
        await self.accept("binary" if "binary" in offered else None)
        if shown:
            await self.send(bytes_data=shown)
        # A thread of its own, not the loop's executor: it blocks for the terminal's lifetime.
        self.reader = threading.Thread(
            target=self._from_guest,
            args=(self.console, asyncio.get_running_loop()),
            name=f"serial-vm-{target.vm_id}",
            daemon=True,
        )
        self.reader.start()

    def _from_guest(self, console: ConsoleStream, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while chunk := console.recv():
                sent = asyncio.run_coroutine_threadsafe(self.send(bytes_data=chunk), loop)
                sent.result()
        except Exception as exc:  # the guest stopped, the host went away, the loop closed
            logger.info("Serial terminal ended: %s", exc)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                asyncio.run_coroutine_threadsafe(self.close(), loop)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        if self.console is None:
            return
        data = bytes_data if bytes_data is not None else (text_data or "").encode()
        if not data:
            return
        try:
            await asyncio.to_thread(self.console.send, data)
        except DriverError:
            await self.close()

    async def disconnect(self, code) -> None:
        if self.console is not None:
            await asyncio.to_thread(self.console.close)
