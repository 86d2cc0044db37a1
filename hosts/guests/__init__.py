"""Reaching a guest: what it shows of itself (``guestinfo``: addresses, the VNC port, the serial
console's tail, read by the sync loop), the cloud-init seed that carries its users' keys
(``cloudinit``), console tickets (``consoles``), the portal's console pages
(``console_pages``) and the WebSocket relay to the VM's screen (``console_relay``)."""
