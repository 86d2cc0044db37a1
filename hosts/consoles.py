"""Where a VM's screen (VNC) is reached from Corral's web tier, and the one-time tickets that
let a user open it.

A local host (a ``qemu:///…`` or ``qemu+unix://`` URI, no host name) has its guests' VNC
listen on the loopback only; a remote host's listen on every address of the host, and Corral
connects to the host name of its URI: firewall the VNC ports (5900 and up) so only Corral's
web tier reaches them. The websocket relay connects only to the address and port recorded for
the VM (``console_target``), never to one a client names.
"""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"
LOCAL_NAMES = {"", "localhost", "127.0.0.1", "::1"}


def _host_name(uri: str) -> str:
    try:
        return (urlsplit(uri).hostname or "").lower()
    except ValueError:
        return ""


def is_local(uri: str) -> bool:
    return _host_name(uri) in LOCAL_NAMES


def listen_address(uri: str) -> str:
    """The address a guest's VNC listens on, for a host at ``uri``."""
    return LOOPBACK if is_local(uri) else "0.0.0.0"


def console_address(uri: str) -> str:
    """The address Corral connects to for the screens of the guests of the host at ``uri``."""
    return LOOPBACK if is_local(uri) else _host_name(uri)
