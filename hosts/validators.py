"""Validation of libvirt connection URIs and network name lists, shared by models and the API."""

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

# Hypervisor drivers libvirt knows (virConnectOpen's URI schemes), and its remote transports.
LIBVIRT_DRIVERS = {
    "bhyve",
    "ch",
    "esx",
    "gsx",
    "hyperv",
    "lxc",
    "openvz",
    "qemu",
    "test",
    "vbox",
    "vmwarefusion",
    "vmwareplayer",
    "vmwarews",
    "vpx",
    "vz",
    "xen",
}
LIBVIRT_TRANSPORTS = {"unix", "ssh", "libssh", "libssh2", "tls", "tcp", "ext"}

_NETWORK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def validate_libvirt_uri(value: str) -> None:
    """Accept what ``virConnectOpen`` accepts: ``driver[+transport]://[user@][host][:port]/path``.

    Passwords in the URI are refused: credentials belong in SSH keys or TLS certificates.
    """
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"Not a valid libvirt URI: {exc}.") from exc
    driver, _, transport = parts.scheme.partition("+")
    if not parts.scheme or "://" not in value:
        raise ValidationError(
            "Not a libvirt URI: expected driver[+transport]://[user@][host][:port]/path, "
            "for example qemu+ssh://root@host1/system."
        )
    if driver not in LIBVIRT_DRIVERS:
        raise ValidationError(
            f"Unknown libvirt driver {driver!r}; "
            f"expected one of {', '.join(sorted(LIBVIRT_DRIVERS))}."
        )
    if transport and transport not in LIBVIRT_TRANSPORTS:
        raise ValidationError(
            f"Unknown libvirt transport {transport!r}; expected one of "
            f"{', '.join(sorted(LIBVIRT_TRANSPORTS))}."
        )
    if parts.password:
        raise ValidationError(
            "Do not put a password in the URI; use SSH keys or TLS certificates instead."
        )
    if port is not None and not 0 < port < 65536:
        raise ValidationError("The port must be between 1 and 65535.")
    if not parts.path or parts.path == "/":
        raise ValidationError(
            "The URI needs a path naming the connection, such as /system, /session or /default."
        )
    if any(ch.isspace() for ch in value):
        raise ValidationError("A libvirt URI cannot contain spaces.")


# The user-information part of a URI holding a password: "scheme://user:password@".
_PASSWORD_PART = re.compile(r"^(?P<scheme>[^:/?#]+://)(?P<user>[^:/?#@]*):[^/?#]*@")


def without_password(uri: str) -> str:
    """The URI with any password left out (``ssh://root:secret@h/`` -> ``ssh://root@h/``)."""

    def keep_user(match: re.Match) -> str:
        user = match["user"]
        return match["scheme"] + (f"{user}@" if user else "")

    return _PASSWORD_PART.sub(keep_user, uri, count=1)


def validate_network_names(value) -> None:
    """A list of distinct network names such as ``["default", "lab-net"]``."""
    if not isinstance(value, list):
        raise ValidationError("Networks must be a list of network names.")
    for name in value:
        if not isinstance(name, str) or not _NETWORK_NAME.match(name):
            raise ValidationError(
                f"{name!r} is not a network name (letters, digits, '.', '_' and '-', at most 64)."
            )
    if len(set(value)) != len(value):
        raise ValidationError("Each network may be listed only once.")
