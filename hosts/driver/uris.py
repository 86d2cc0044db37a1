"""Which libvirt connection URIs Corral opens: an allowlist, part by part.

libvirt runs a program on the machine that opens a connection when the URI asks it to: the
``ext`` transport runs its ``command``, the ``command``, ``netcat`` and ``proxy`` parameters
choose what ssh runs, and ssh reads a user or host name starting with ``-`` as an option.
libvirt also decodes ``%XX`` escapes, reads parameter names in any case and splits the query
at ``;`` as well as ``&``. So a URI is accepted only when every part is on a list: a driver and
path Corral uses, a transport that runs nothing of the URI's choosing, plain user and host
names, parameters that name no program, each value in a plain shape. ``refusal(uri)`` gives
the reason a URI is refused (``None``: accepted); model validation and the driver's
``connection()`` both ask it, so a URI written straight into the database is never opened.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

# driver -> the paths Corral opens. Any other test-driver path is a file the test driver would
# read on this machine; qemu:///embed runs QEMU inside the process opening the connection.
DRIVER_PATHS = {"qemu": ("/system", "/session"), "test": ("/default",)}
SSH_TRANSPORTS = ("ssh", "libssh", "libssh2")
NETWORK_TRANSPORTS = (*SSH_TRANSPORTS, "tls", "tcp")
TRANSPORTS = (*NETWORK_TRANSPORTS, "unix")
SSH_AUTH_METHODS = ("agent", "privkey", "password", "keyboard-interactive")
MODES = ("auto", "legacy", "direct")
# What the host's daemon may be asked to open (``name``): a local URI, never one that reaches
# further (and could carry a program of its own).
LOCAL_URIS = tuple(f"{driver}://{path}" for driver, paths in DRIVER_PATHS.items() for path in paths)

# Parameters naming a program, refused in any letter case (libvirt ignores the case).
PROGRAM_PARAMETERS = {
    "command": "names a program for libvirt to run on the Corral server",
    "netcat": "names a program for libvirt to run on the host through ssh",
    "proxy": "chooses a program for libvirt to run on the host through ssh",
}

NOT_A_URI = (
    "Not a libvirt URI: expected driver[+transport]://[user@][host][:port]/path, "
    "for example qemu+ssh://root@host1/system."
)
EXT_TRANSPORT = (
    "The libvirt 'ext' transport runs a program on the Corral server; "
    "use ssh, libssh, libssh2, tls, tcp or unix."
)
PERCENT = (
    "A libvirt URI may not hold '%' escapes: libvirt decodes them, so they could hide what "
    "the URI asks for; write the characters plainly."
)
PASSWORD = "Do not put a password in the URI; use SSH keys or TLS certificates instead."
PORT = "The port must be a number between 1 and 65535."

_URI = re.compile(
    r"(?P<scheme>[^:/?#]*)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)"
    r"(?:\?(?P<query>[^#]*))?(?P<fragment>#.*)?"
)
# A user-information part holding a password ("scheme://user:password@"), checked before
# anything else so that a refusal always says so.
_PASSWORD = re.compile(r"[^:/?#]*://[^/?#@]*:[^/?#]*@")
_USER = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,63}")
_DNS_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")
_FILE_PATH = re.compile(r"/[A-Za-z0-9._-][A-Za-z0-9._/-]{0,254}")


class Refusal(Exception):
    """The first reason found; ``refusal`` returns it."""


@functools.lru_cache(maxsize=1024)
def refusal(uri: str) -> str | None:
    """Why Corral refuses to open ``uri``, or ``None`` when it accepts it."""
    try:
        _check(uri)
    except Refusal as refused:
        return str(refused)
    return None


# scheme -> the allowlist of a backend other than libvirt (``base.register_backend``): a URI of
# that scheme is accepted only when its check raises no ``Refusal``. None by default, so a
# product without the lab refuses simulator URIs as it refuses any unknown driver.
SCHEME_CHECKS: dict[str, Callable[[str], None]] = {}


# libvirt drivers accepted only once a backend serves them (``base.register_libvirt_backend``):
# the test driver's hosts are simulated, which only the lab does (development and tests).
BACKEND_ONLY_DRIVERS = frozenset({"test"})
_served_drivers: set[str] = set()

LOCAL_NAMES = frozenset({"", "localhost", "127.0.0.1", "::1"})


def host_name(uri: str) -> str:
    """The host name a URI names, lower-case ("" for a local URI such as ``qemu:///system``)."""
    from urllib.parse import urlsplit

    try:
        return (urlsplit(uri).hostname or "").lower()
    except ValueError:
        return ""


def is_local(uri: str) -> bool:
    """The URI leads to a daemon on this machine (no host name, or the loopback's)."""
    return host_name(uri) in LOCAL_NAMES


@dataclass(frozen=True)
class SshTarget:
    """Where a URI's SSH transport leads: user ("" for ssh's default), host, port (22 unless
    named), the transport (``ssh``, ``libssh``, ``libssh2``) and the URI's parameters."""

    transport: str
    user: str
    host: str
    port: int
    parameters: dict[str, str]


def ssh_target(uri: str) -> SshTarget | None:
    """The SSH end of an accepted URI reached over SSH; None for any other transport."""
    found = _URI.fullmatch(uri)
    if found is None or refusal(uri) is not None:
        return None
    transport = found["scheme"].partition("+")[2]
    if transport not in SSH_TRANSPORTS:
        return None
    userinfo, _, hostport = found["authority"].rpartition("@")
    host, port = _host_and_port(hostport)
    parameters = dict(
        section.partition("=")[::2] for section in (found["query"] or "").split("&") if section
    )
    return SshTarget(transport, userinfo, host.strip("[]").lower(), int(port or 22), parameters)


def with_transport(uri: str, transport: str, parameters: dict[str, str]) -> str:
    """``uri`` over ``transport`` with ``parameters`` added (an accepted URI's own are kept)."""
    found = _URI.fullmatch(uri)
    driver = found["scheme"].partition("+")[0]
    query = "&".join(
        [*(found["query"] or "").split("&"), *(f"{k}={v}" for k, v in parameters.items())]
    ).strip("&")
    return f"{driver}+{transport}://{found['authority']}{found['path']}" + (
        f"?{query}" if query else ""
    )


def register_scheme(scheme: str, check: Callable[[str], None]) -> None:
    SCHEME_CHECKS[scheme] = check
    refusal.cache_clear()


def serve_driver(driver: str) -> None:
    """Accept URIs of ``driver``, one of ``BACKEND_ONLY_DRIVERS``, from now on."""
    _served_drivers.add(driver)
    refusal.cache_clear()


def plain_name(what: str, value: str) -> None:
    """A DNS label: letters, digits and inner '-'."""
    if not _DNS_LABEL.fullmatch(value):
        raise Refusal(f"{value!r} is not {what}.")


def _check(uri: str) -> None:
    if not uri:
        raise Refusal("Give a libvirt URI, for example qemu+ssh://root@host1/system.")
    if any(ch.isspace() for ch in uri):
        raise Refusal("A libvirt URI cannot contain spaces.")
    if not (uri.isascii() and uri.isprintable()):
        raise Refusal("A libvirt URI holds only printable ASCII characters.")
    if _PASSWORD.match(uri):
        raise Refusal(PASSWORD)
    if "%" in uri:
        raise Refusal(PERCENT)
    for scheme, check in SCHEME_CHECKS.items():
        driver = scheme.split("+")[0]
        if uri.startswith((f"{driver}+", f"{driver}:")):
            check(uri)
            return
    match = _URI.fullmatch(uri)
    if match is None or not match["scheme"]:
        raise Refusal(NOT_A_URI)
    if match["fragment"] is not None:
        raise Refusal("A libvirt URI takes no fragment (the part from '#').")
    driver, transport = _driver_and_transport(match["scheme"])
    host = _check_authority(match["authority"], transport)
    _check_path(driver, match["path"])
    if match["query"] is not None:
        _check_parameters(match["query"], transport, host)


def _driver_and_transport(scheme: str) -> tuple[str, str | None]:
    driver, plus, transport = scheme.partition("+")
    if driver not in DRIVER_PATHS:
        supported = [
            d for d in DRIVER_PATHS if d not in BACKEND_ONLY_DRIVERS or d in _served_drivers
        ]
        raise Refusal(
            f"Corral does not open {driver!r} URIs: "
            + (
                f"the libvirt drivers it supports are {' and '.join(supported)}."
                if len(supported) > 1
                else f"the libvirt driver it supports is {supported[0]}."
            )
        )
    if driver in BACKEND_ONLY_DRIVERS and driver not in _served_drivers:
        raise Refusal(
            f"{driver} URIs name simulated hosts, which only Corral's lab runs (development "
            "and tests); this installation does not."
        )
    if not plus:
        return driver, None
    if transport == "ext":
        raise Refusal(EXT_TRANSPORT)
    if transport not in TRANSPORTS:
        raise Refusal(
            f"Unknown libvirt transport {transport!r}; use ssh, libssh, libssh2, tls, tcp or unix."
        )
    return driver, transport


def _check_authority(authority: str, transport: str | None) -> str:
    """Check ``[user@]host[:port]`` against the transport; returns the host ('' for none)."""
    userinfo, at, hostport = authority.rpartition("@")
    if "@" in userinfo:
        raise Refusal("A libvirt URI names at most one user: it has more than one '@'.")
    if at:
        _check_user(userinfo)
    host, port = _host_and_port(hostport)
    if transport == "unix" and authority:
        raise Refusal(
            "The unix transport reaches a socket on this machine: it takes no user, host or port."
        )
    if transport in NETWORK_TRANSPORTS and not host:
        raise Refusal(
            f"The {transport} transport needs a host, "
            f"for example qemu+{transport}://kvm1.example.org/system."
        )
    if not host and (at or port):
        raise Refusal("A user or a port needs a host.")
    return host


def _check_user(user: str) -> None:
    if not user:
        raise Refusal("The user name before '@' is empty.")
    if user.startswith("-"):
        raise Refusal(f"The user name {user!r} starts with '-': ssh would read it as an option.")
    if not _USER.fullmatch(user):
        raise Refusal(
            f"The user name {user!r} may hold only letters, digits, '.', '_' and '-' (at most 64)."
        )


def _host_and_port(hostport: str) -> tuple[str, str]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise Refusal("An IPv6 address in a URI needs its closing ']'.")
        host, rest = hostport[: end + 1], hostport[end + 1 :]
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError as exc:
            raise Refusal(f"{host!r} is not an IPv6 address in brackets.") from exc
    else:
        host, colon, port = hostport.partition(":")
        rest = colon + port
        if host:
            _check_host_name(host)
    if not rest:
        return host, ""
    port = rest[1:]
    if not rest.startswith(":") or not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        raise Refusal(PORT)
    return host, port


def _check_host_name(host: str) -> None:
    if host.startswith("-"):
        raise Refusal(f"The host name {host!r} starts with '-': ssh would read it as an option.")
    refused = Refusal(
        f"The host {host!r} is not a DNS name, an IPv4 address or an IPv6 address in brackets."
    )
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError as exc:
            raise refused from exc
    elif len(host) > 253 or not all(_DNS_LABEL.fullmatch(part) for part in host.split(".")):
        raise refused


def _check_path(driver: str, path: str) -> None:
    if path in ("", "/"):
        raise Refusal(
            "The URI needs a path naming the connection, such as /system, /session or /default."
        )
    allowed = DRIVER_PATHS[driver]
    if path in allowed:
        return
    if driver == "qemu" and path == "/embed":
        raise Refusal("qemu:///embed runs QEMU inside the Corral process; use /system or /session.")
    if driver == "test":
        raise Refusal(
            "The test driver's path must be /default: any other path names a file the test "
            "driver would read on the Corral server."
        )
    raise Refusal(f"The {driver} driver's path is {' or '.join(allowed)}, not {path!r}.")


def _check_parameters(query: str, transport: str | None, host: str) -> None:
    seen = set()
    for section in query.split("&"):
        if not section:
            raise Refusal("The URI has an empty parameter (a '?' or '&' with nothing after it).")
        name, _, value = section.partition("=")
        if name.lower() in PROGRAM_PARAMETERS:
            raise Refusal(
                f"The libvirt parameter {name!r} {PROGRAM_PARAMETERS[name.lower()]}; "
                "it is not accepted."
            )
        check = PARAMETER_CHECKS.get(name)
        if check is None:
            raise Refusal(
                f"Unknown libvirt URI parameter {name!r}; "
                f"Corral accepts {', '.join(sorted(PARAMETER_CHECKS))}."
            )
        if name in seen:
            raise Refusal(f"The parameter {name!r} is given more than once.")
        seen.add(name)
        check(name, value)
        if name == "socket" and not (transport == "unix" or (transport is None and not host)):
            raise Refusal(
                "The socket parameter names a socket on this machine: use it with the unix "
                "transport or a local URI, such as qemu+unix:///system?socket=/run/x/sock."
            )


def file_path(name: str, value: str) -> None:
    if not _FILE_PATH.fullmatch(value):
        raise Refusal(
            f"The {name} parameter must be an absolute path of letters, digits, '.', '_', '-' "
            f"and '/', not {value!r}."
        )


def _flag(name: str, value: str) -> None:
    if value not in ("0", "1"):
        raise Refusal(f"The {name} parameter is 0 or 1, not {value!r}.")


def _mode(name: str, value: str) -> None:
    if value not in MODES:
        raise Refusal(f"The mode parameter is auto, legacy or direct, not {value!r}.")


def _ssh_auth(name: str, value: str) -> None:
    methods = value.split(",")
    if not all(method in SSH_AUTH_METHODS for method in methods):
        raise Refusal(
            f"The sshauth parameter is a comma-separated list of {', '.join(SSH_AUTH_METHODS)}, "
            f"not {value!r}."
        )
    if len(set(methods)) != len(methods):
        raise Refusal("The sshauth parameter names each method at most once.")


def _known_hosts_verify(name: str, value: str) -> None:
    if value != "normal":
        raise Refusal(
            "The known_hosts_verify parameter may only be normal: Corral never accepts a host "
            f"key it was not told to trust, not {value!r}."
        )


def _local_uri(name: str, value: str) -> None:
    if value not in LOCAL_URIS:
        raise Refusal(
            f"The name parameter is the URI the host's daemon opens: one of "
            f"{', '.join(LOCAL_URIS)}, not {value!r}."
        )


# Where a host receives migrations (``Host.migration_address``): the host part of libvirt's
# migration URI ``tcp://ADDRESS`` and nothing else, so it can bring no option, port or path in.
MIGRATION_ADDRESS = (
    "Give a host name or an IP address only (kvm1.example.org, 192.0.2.10, 2001:db8::10): no "
    "scheme, user, port or path."
)
_ADDRESS_CHARACTERS = re.compile(r"[A-Za-z0-9.:\[\]-]+")


def address_refusal(address: str) -> str | None:
    """Why ``address`` is not a plain DNS name, IPv4 or IPv6 address (bracketed or not), or
    ``None`` when it is one."""
    if not address or len(address) > 253 or not _ADDRESS_CHARACTERS.fullmatch(address):
        return MIGRATION_ADDRESS
    if address.startswith("-"):
        return f"{address!r} starts with '-'. {MIGRATION_ADDRESS}"
    bare = address[1:-1] if address.startswith("[") and address.endswith("]") else address
    if ":" in bare or bare != address:
        try:
            ipaddress.IPv6Address(bare)
        except ValueError:
            return f"{address!r} is not an IPv6 address. {MIGRATION_ADDRESS}"
        return None
    try:
        _check_host_name(address)
    except Refusal:
        return f"{address!r} is not a DNS name or an IPv4 address. {MIGRATION_ADDRESS}"
    return None


def migration_uri(address: str) -> str:
    """libvirt's URI for a migration stream to ``address``: ``tcp://ADDRESS`` (an IPv6 address
    in brackets). ``Refusal`` for an address ``address_refusal`` refuses."""
    reason = address_refusal(address)
    if reason is not None:
        raise Refusal(reason)
    bare = address.strip("[]")
    return f"tcp://[{bare}]" if ":" in bare else f"tcp://{bare}"


PARAMETER_CHECKS = {
    "socket": file_path,
    "keyfile": file_path,
    "known_hosts": file_path,
    "pkipath": file_path,
    "no_verify": _flag,
    "no_tty": _flag,
    "mode": _mode,
    "sshauth": _ssh_auth,
    "known_hosts_verify": _known_hosts_verify,
    "name": _local_uri,
}
