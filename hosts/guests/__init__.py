"""Reaching a guest: what it shows of itself (``guestinfo``: addresses, the VNC port, the serial
console's tail, read by the sync loop), the cloud-init seed that carries its users' keys
(``cloudinit``), the keys put in a running guest through its agent (``keys``, ``key_state``),
where its user logs in by SSH (``ssh``), console tickets (``consoles``), the portal's console
and terminal pages (``console_pages``), the WebSocket relays to the VM's screen
(``console_relay``) and serial console (``serial_relay``), and the serial log as plain text
(``terminal_text``)."""
