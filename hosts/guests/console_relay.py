"""The console websocket: redeems a one-time ticket, authenticates to the VM's screen with
the password the ticket's redemption set on it (``consoles.redeem_ticket``), and relays the
VNC (RFB) stream between the browser (noVNC) and the VM's host.

It connects only where the ticket leads (the VM's host address and the port its screen has
there), never to an address a client names. The browser is offered no security of its own
(``rfb.BrowserHandshake``: the ticket was its credential) and never sees the password; after
the two handshakes the bytes are relayed as they come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from hosts import driver
from hosts.guests import consoles, rfb

logger = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 10
CHUNK = 64 * 1024
# Close codes (4000-4999 are the application's): the ticket was refused, the host unreachable
# (or its screen refused the relay), the browser spoke something other than RFB.
REFUSED = 4403
UNREACHABLE = 4502
NOT_RFB = 4400
# Another console opened on the same screen in between may replace the password just set.
AUTH_ATTEMPTS = 3


async def _credential(vm) -> consoles.ConsoleTarget | None:
    return await asyncio.to_thread(consoles.screen_credential, vm)


class ConsoleRelay(AsyncWebsocketConsumer):
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    pump: asyncio.Task | None = None
    handshake: rfb.BrowserHandshake | None = None

    async def connect(self) -> None:
        token = self.scope["url_route"]["kwargs"].get("ticket", "")
        redeem = database_sync_to_async(consoles.redeem_ticket)
        try:
            vm = await redeem(token, self.scope.get("user"))
            # The host is asked on a thread of its own: a slow host never holds up the
            # database work of the other requests this process serves.
            target = None if vm is None else await _credential(vm)
            if target is None:
                await self.close(code=REFUSED)
                return
            await self._reach(target)
        except (OSError, TimeoutError, rfb.HandshakeFailed, driver.DriverError) as exc:
            logger.warning("Console: cannot open the screen: %s", exc)
            self._close_host()
            await self.close(code=UNREACHABLE)
            return
        offered = self.scope.get("subprotocols") or []
        await self.accept("binary" if "binary" in offered else None)
        self.handshake = rfb.BrowserHandshake()
        await self.send(bytes_data=self.handshake.greeting())

    async def _reach(self, target: consoles.ConsoleTarget) -> None:
        """Connect to the screen and authenticate; when it refuses the password (another
        console of the same VM set its own in between), set a new one and try again."""
        on_its_host = database_sync_to_async(consoles.vm_on_its_host)
        for attempt in range(AUTH_ATTEMPTS):
            self._close_host()
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(target.address, target.port), CONNECT_TIMEOUT_S
            )
            try:
                await asyncio.wait_for(
                    rfb.authenticate(self.reader, self.writer, target.password),
                    CONNECT_TIMEOUT_S,
                )
                return
            except rfb.HandshakeFailed as refused:
                if attempt + 1 == AUTH_ATTEMPTS:
                    raise rfb.HandshakeFailed(
                        f"VM {target.vm_id} at {target.address}:{target.port}: {refused}"
                    ) from refused
                vm_id = target.vm_id
                vm = await on_its_host(vm_id)
                target = None if vm is None else await _credential(vm)
                if target is None:
                    raise rfb.HandshakeFailed(f"VM {vm_id} shows no screen any more") from refused

    def _close_host(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def _from_host(self) -> None:
        try:
            while True:
                chunk = await self.reader.read(CHUNK)
                if not chunk:
                    break
                await self.send(bytes_data=chunk)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                await self.close()

    async def receive(self, text_data=None, bytes_data=None) -> None:
        if self.writer is None or bytes_data is None:
            return
        if self.handshake is not None and not self.handshake.done:
            try:
                answer = self.handshake.feed(bytes_data)
            except rfb.HandshakeFailed as exc:
                logger.info("Console: %s", exc)
                await self.close(code=NOT_RFB)
                return
            if answer:
                await self.send(bytes_data=answer)
            if not self.handshake.done:
                return
            bytes_data = self.handshake.rest
            self.pump = asyncio.ensure_future(self._from_host())
            if not bytes_data:
                return
        self.writer.write(bytes_data)
        await self.writer.drain()

    async def disconnect(self, code) -> None:
        if self.pump is not None:
            self.pump.cancel()
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
