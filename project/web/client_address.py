"""The address a request comes from, for throttling log-ins: the connection's own address,
or, when that is a proxy named in ``CORRAL_TRUSTED_PROXIES``, the address that proxy saw.

Behind trusted proxies, ``X-Forwarded-For`` lists the hops the request passed, each proxy
appending the address it was connected from. Only the entries our own proxies appended can be
believed, so the list is read from the right: the first address that is not itself a trusted
proxy is the client. Everything to its left was written by the client and is ignored; so is
the whole header when the connection does not come from a trusted proxy. An entry that is not
an address ends the walk at the last trusted proxy: a broken header never raises, and never
lets its sender pick the address they are counted under.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv6Address

from django.conf import settings

Address = IPv4Address | IPv6Address


def parse_address(text: str) -> Address | None:
    """An address as written in REMOTE_ADDR or one X-Forwarded-For entry (``1.2.3.4``,
    ``1.2.3.4:5678``, ``2001:db8::1``, ``[2001:db8::1]:5678``); None if it is none of those.
    IPv4 addresses mapped into IPv6 (``::ffff:1.2.3.4``) come back as IPv4."""
    text = text.strip()
    port = ""
    if text.startswith("["):
        text, bracket, port = text[1:].partition("]")
        if not bracket or not (port == "" or port.startswith(":")):
            return None
        port = port[1:]
    elif text.count(":") == 1:
        text, _, port = text.partition(":")  # IPv4 with a port
    if port and not (port.isascii() and port.isdigit()):
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def trusted_proxies() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(entry, strict=False) for entry in settings.CORRAL_TRUSTED_PROXIES]


def _is_trusted(address: Address, proxies) -> bool:
    return any(address.version == network.version and address in network for network in proxies)


def client_address(request) -> Address | None:
    """Where ``request`` comes from (None when the server gave no usable address)."""
    if request is None:
        return None
    nearest = parse_address(request.META.get("REMOTE_ADDR") or "")
    proxies = trusted_proxies()
    if nearest is None or not _is_trusted(nearest, proxies):
        return nearest
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR") or ""
    for entry in reversed(forwarded.split(",")):
        hop = parse_address(entry)
        if hop is None:
            break
        nearest = hop
        if not _is_trusted(hop, proxies):
            break
    return nearest
