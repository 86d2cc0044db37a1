"""The console websocket: redeems a one-time ticket and relays the VM's VNC (RFB) stream
between the browser (noVNC) and the VM's host, byte for byte.

It connects only where the ticket leads (``hosts.guests.consoles.redeem_ticket``: the VM's host
address and the VNC port the guest-info loop read from it), never to an address a client
names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from hosts.guests import consoles

logger = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 10
CHUNK = 64 * 1024
# Close codes (4000-4999 are the application's): the ticket was refused, the host unreachable.
REFUSED = 4403
UNREACHABLE = 4502


class ConsoleRelay(AsyncWebsocketConsumer):
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    pump: asyncio.Task | None = None

    async def connect(self) -> None:
        token = self.scope["url_route"]["kwargs"].get("ticket", "")
        target = await database_sync_to_async(consoles.redeem_ticket)(token, self.scope.get("user"))
        if target is None:
            await self.close(code=REFUSED)
            return
        try:
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(target.address, target.port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            logger.warning(
                "Console of VM %s: cannot reach %s:%s: %s",
                target.vm_id,
                target.address,
                target.port,
                exc,
            )
            await self.close(code=UNREACHABLE)
            return
        offered = self.scope.get("subprotocols") or []
        await self.accept("binary" if "binary" in offered else None)
        self.pump = asyncio.ensure_future(self._from_host())

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
        self.writer.write(bytes_data)
        await self.writer.drain()

    async def disconnect(self, code) -> None:
        if self.pump is not None:
            self.pump.cancel()
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
